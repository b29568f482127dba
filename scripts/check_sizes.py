#!/usr/bin/env python3
"""The tree's size rules, checked: no function over 100 lines in src/, apps/ and python/
(C++ and Python), no test file over 600 lines. Prints each breach as PATH:LINE NAME (N lines)
and exits 1 if there is one; ctest runs it as `style.sizes`.

    scripts/check_sizes.py [--root DIR] [--function-lines 100] [--test-file-lines 600]

C++ functions are found by their braces: a brace opened after a `)` (and not a control
statement) outside any other function starts one; namespaces, classes and initialisers do
not. Comments, strings and character literals are blanked first, so braces in them do not
count. Python functions come from the ast (a method counts on its own; a nested function
is counted inside its parent too)."""
import argparse
import ast
import os
import re
import sys

CPP = (".cc", ".h", ".cpp", ".hpp", ".cu")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|try)\b")


def blank_cpp(text):
    """The text with comments, strings and char literals replaced by spaces (newlines kept)."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"([^(]*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def cpp_functions(text):
    """(first line, name, lines) of each function body in C++ source."""
    text = blank_cpp(text)
    out, stack, statement, line = [], [], "", 1
    for ch in text:
        if ch == "\n":
            line += 1
        if ch == "{":
            head = statement.strip()
            inside = any(kind == "func" for kind, _, _ in stack)
            if inside:
                kind = "block"
            elif re.match(r"^(namespace|extern)\b", head):
                kind = "ns"
            elif re.search(r"\b(class|struct|union|enum)\b[^()]*$", head):
                kind = "class"
            elif head.endswith(")") or re.search(r"\)\s*(const|override|final|noexcept|mutable|->[^{]*|"
                                                 r":[^{]*)*\s*$", head):
                kind = "func" if not CONTROL.match(head) else "block"
            else:
                kind = "other"  # an initialiser, a lambda at namespace scope
            name = re.findall(r"([~\w:]+)\s*\(", head)
            stack.append((kind, line, name[0] if name else head[-40:]))
            statement = ""
        elif ch == "}":
            if stack:
                kind, first, name = stack.pop()
                if kind == "func":
                    out.append((first, name, line - first + 1))
            statement = ""
        elif ch == ";":
            statement = ""
        else:
            statement += ch
    return out


def python_functions(text, path):
    tree = ast.parse(text, path)
    return [(n.lineno, n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def files(root, folders, suffixes):
    for folder in folders:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if name.endswith(suffixes):
                    yield os.path.join(dirpath, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--function-lines", type=int, default=100)
    ap.add_argument("--test-file-lines", type=int, default=600)
    a = ap.parse_args()
    breaches = []
    for path in files(a.root, ("src", "apps", "python"), CPP + (".py",)):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found = python_functions(text, path) if path.endswith(".py") else cpp_functions(text)
        for first, name, lines in found:
            if lines > a.function_lines:
                breaches.append(f"{os.path.relpath(path, a.root)}:{first} {name} ({lines} lines; at most "
                                f"{a.function_lines})")
    for path in files(a.root, ("tests",), CPP + (".py", ".sh")):
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        if lines > a.test_file_lines:
            breaches.append(f"{os.path.relpath(path, a.root)} ({lines} lines; a test file has at most "
                            f"{a.test_file_lines})")
    for b in breaches:
        print(b)
    print(f"check_sizes: {len(breaches)} breach{'es' if len(breaches) != 1 else ''}")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
