#!/usr/bin/env python3
"""Lists the end-to-end cases of the given test_*.py modules for CMake, one line each:

    <ctest name> <module>::<pytest node> [<PROPERTY> <value>]...

mpi.<case> for `def test_<case>`, mpi.<case>_<value> for each value of a
@pytest.mark.parametrize over one argument. The properties: DEFAULTS, over which a
@pytest.mark.ctest(PROPERTY=value, ...) on the case wins (None drops one). It reads the
modules' syntax only (no import: no pytest needed to configure), so a case's list is
written once, in its module.
"""
import ast
import os
import sys

DEFAULTS = {"TIMEOUT": 400, "SKIP_RETURN_CODE": 77}


def mark(decorator, name):
    """The call of @pytest.mark.<name>(...), or None."""
    if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == f"pytest.mark.{name}":
        return decorator
    return None


def cases(path):
    module = os.path.basename(path)
    for fn in ast.parse(open(path).read(), path).body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_")):
            continue
        props, params = dict(DEFAULTS), [None]
        for d in fn.decorator_list:
            if (c := mark(d, "ctest")) is not None:
                props.update({k.arg: ast.literal_eval(k.value) for k in c.keywords})
            elif (c := mark(d, "parametrize")) is not None:
                names, values = (ast.literal_eval(a) for a in c.args[:2])
                if "," in names or c.keywords or not all(isinstance(v, str) and v.isidentifier() for v in values):
                    sys.exit(f"{path}: {fn.name}: only one parameter of plain names is supported here")
                params = values
            elif ast.unparse(d).startswith("pytest.mark."):
                sys.exit(f"{path}: {fn.name}: {ast.unparse(d)} is not understood here")
        case = fn.name[len("test_"):]
        for p in params:
            name, node = (case, fn.name) if p is None else (f"{case}_{p}", f"{fn.name}[{p}]")
            fields = [f"mpi.{name}", f"{module}::{node}"]
            for k, v in props.items():
                if v is not None:
                    fields += [k, str(v)]
            yield " ".join(fields)


if __name__ == "__main__":
    seen = set()
    for path in sorted(sys.argv[1:]):
        for line in cases(path):
            name = line.split()[0]
            if name in seen:
                sys.exit(f"{path}: two cases named {name}")
            seen.add(name)
            print(line)
