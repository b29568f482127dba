#!/usr/bin/env python3
"""The core (src/) names options only as OptionError fields ("{batch=0}", "{staleness}"),
which each front end says in its own words: the CLI "--batch 0", Python "batch=0". A CLI
flag written into a core error would tell a Python user a flag they cannot pass. Fails
listing every throw statement under src/ whose text holds a "--flag", or a "{field}" in an
error that is not an OptionError (no front end would render it)."""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
# A string literal holding --word; mpirun's own flags (a hint on how to place ranks) are not ours.
FLAG = re.compile(r'"[^"\n]*(?<!mpirun )(?<![-\w])--[a-z][a-z-]*')


# An option field ("{batch}", "{data=DIR}") in an error that is not an OptionError: no front
# end would say it, and the braces would reach the user.
FIELD = re.compile(r'"[^"\n]*\{[a-z_]+(=[^}"]*)?\}')


def statements(text):
    """Each `throw ...;` with the line it starts on (string literals may hold ';')."""
    for m in re.finditer(r"\bthrow\b", text):
        end, quoted = m.start(), False
        while end < len(text) and (quoted or text[end] != ";"):
            if text[end] == '"' and text[end - 1] != "\\":
                quoted = not quoted
            end += 1
        yield text.count("\n", 0, m.start()) + 1, text[m.start():end]


def main():
    bad = []
    files = sorted((ROOT / "src").rglob("*.cc")) + sorted((ROOT / "src").rglob("*.h"))
    if not files:
        sys.exit(f"no sources under {ROOT / 'src'}")
    for path in files:
        for line, stmt in statements(path.read_text()):
            if FLAG.search(stmt) or (FIELD.search(stmt) and "OptionError" not in stmt):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {' '.join(stmt.split())[:160]}")
    if bad:
        print("core errors that name CLI flags, or option fields outside an OptionError (write {field} or "
              "{field=value} in an OptionError):")
        print("\n".join(bad))
        sys.exit(1)
    print(f"{len(files)} files under src/: every error names options as OptionError fields")


if __name__ == "__main__":
    main()
