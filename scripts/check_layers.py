#!/usr/bin/env python3
"""The folders of src/ depend one way: the include graph between them has no cycle. Prints
the folders from the bottom up (each after everything it includes) and exits 0, or prints
each cycle's includes (FILE: #include "FOLDER/...") and exits 1; ctest runs it as
`style.layers`.

    scripts/check_layers.py [--root DIR]
"""
import argparse
import collections
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/[^"]+"', re.M)


def edges(src):
    """{folder: {included folder: [(file, line)]}} over src/'s folders."""
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    out = {f: collections.defaultdict(list) for f in folders}
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(src, folder)):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    to = m.group(1)
                    if to != folder and to in out:
                        line = text.count("\n", 0, m.start()) + 1
                        out[folder][to].append(f"{os.path.relpath(path, os.path.dirname(src))}:{line}")
    return out


def layers(graph):
    """The folders bottom-up (Kahn's order), and those left on cycles."""
    pending = {f: set(graph[f]) for f in graph}
    order = []
    while True:
        ready = sorted(f for f, deps in pending.items() if not deps)
        if not ready:
            break
        order += ready
        for f in ready:
            del pending[f]
        for deps in pending.values():
            deps.difference_update(ready)
    return order, sorted(pending)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = ap.parse_args()
    graph = edges(os.path.join(a.root, "src"))
    order, stuck = layers(graph)
    if not stuck:
        print("check_layers: src/ from the bottom up:", " ".join(order))
        return 0
    print("check_layers: these folders include each other in a cycle:", " ".join(stuck))
    for f in stuck:
        for to, where in sorted(graph[f].items()):
            if to in stuck:
                print(f"  {f} -> {to}: {', '.join(where)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
