"""Long-function check (scripts/test runs it, and so CI): no function in the product packages
is longer than 60 lines unless its docstring says why, in a sentence starting "Long because".

A long function is usually several steps that want names; when it is not (a table of data, a
parser that reads best top to bottom), say so where the next reader will look.
Usage: .venv/bin/python scripts/long_functions.py   (exit 1 and a list when one is too long)
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The product packages: the import-linter roots (pyproject.toml) less the measurement code.
PACKAGES = [
    name
    for name in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "root_packages"
    ]
    if name != "benchmarks"
]
MAX_LINES = 60
REASON = "Long because"


def too_long(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_LINES and REASON not in (ast.get_docstring(node) or ""):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} ({lines} lines)")
    return found


def main() -> int:
    found = [
        line
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
        for line in too_long(path)
    ]
    for line in found:
        print(line)
    if found:
        print(
            f"{len(found)} over {MAX_LINES} lines: cut into named steps, or say why in the docstring"
        )
        return 1
    print(f"no function over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
