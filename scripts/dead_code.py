"""Dead-code check (scripts/test runs it, and so CI): unused functions, classes, methods,
properties and imports in the product packages, found by vulture.

Two things vulture cannot see are allowed here, so the allow-list below stays short:
- names Django, DRF or django-q2 call by convention (hooks, AppConfigs, admin classes,
  template tags, signal receivers);
- names the code reaches through a dotted-path string (settings' middleware and throttle
  classes, queued jobs by dotted path): every string literal in the product code that looks
  like `package.module.Name` counts as a use of `Name`;
- attributes and methods templates read (`{{ view.room_tokens }}`): every `.name` in a
  template counts as a use of `name`.

The tests and the benchmarks are read as users (a hook only they call is used), but only
the product packages are reported.

Variables and attributes are not reported: in this Django code almost all of them are
declarative (model and serializer fields, admin options), read by the framework.
Usage: .venv/bin/python scripts/dead_code.py   (exit 1 and a list when something is unused)
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

from vulture import Vulture

ROOT = Path(__file__).resolve().parent.parent
# The product packages: the import-linter roots (pyproject.toml) less the measurement code.
PACKAGES = [
    name
    for name in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "root_packages"
    ]
    if name != "benchmarks"
]
REPORTED = {"function", "class", "method", "property", "import"}

# Called by the frameworks by name, never by our code.
FRAMEWORK_NAMES = [
    "*Config",  # AppConfig subclasses (Django discovers them)
    "Command", "add_arguments", "handle",  # management commands
    "ready", "has_*_permission", "get_*", "save_model", "lookups", "queryset",
    "formfield_for_*", "changelist_view", "to_representation", "to_internal_value",
    "validate_*", "create", "update", "map_serializer", "select_renderer",
    "authenticate", "authenticate_header", "allow_request", "wait", "parse", "render",
    "process_view", "process_exception", "__call__", "*Admin", "*Inline",
    "put", "patch", "delete", "post", "head", "options",
    "on_any_event",  # watchdog's FileSystemEventHandler
]  # fmt: skip
FRAMEWORK_DECORATORS = [
    "@register", "@register.*", "@admin.*", "@receiver", "@extend_schema*", "@pytest.*",
    "@*.register", "@benchmark",
]  # fmt: skip
# Reached through getattr: the terminal's `/name` commands, the file protocol zipfile calls.
DISPATCHED_NAMES = ["cmd_*", "writable", "tell", "flush"]

# Used, but in a way no scan of names can see: each with its reason.
ALLOWED = {
    # drf-spectacular registers OpenApiSerializerExtension subclasses when they are defined.
    "RequestSerializerSchema": "an OpenAPI extension, registered by its metaclass",
    # manage.py (not a scanned package) calls it before Django loads, for `lcm_mcp`.
    "answer_initialize_early": "called by manage.py",
}

_DOTTED = re.compile(r"^[a-z_][a-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def _dotted_string_names(files: list[Path]) -> set[str]:
    """The last component of every dotted-path string literal (a use by import_string)."""
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and _DOTTED.match(value) and value.split(".")[0] in PACKAGES:
                names.add(value.rsplit(".", 1)[1])
    return names


_TEMPLATE_ATTRIBUTE = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")


def _template_names() -> set[str]:
    names: set[str] = set()
    for path in ROOT.glob("**/templates/**/*.html"):
        if ".venv" not in path.parts:
            names.update(_TEMPLATE_ATTRIBUTE.findall(path.read_text()))
    return names


def _python_files(packages: list[str]) -> list[Path]:
    return [
        path
        for package in packages
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def main() -> int:
    files = _python_files(PACKAGES)
    users = _python_files(["tests", "benchmarks", "scripts"])
    ignore = (
        FRAMEWORK_NAMES
        + DISPATCHED_NAMES
        + sorted(_dotted_string_names(files))
        + sorted(_template_names())
        + sorted(ALLOWED)
    )
    vulture = Vulture(ignore_names=ignore, ignore_decorators=FRAMEWORK_DECORATORS)
    vulture.scavenge([str(p) for p in files + users])
    product = {str(p) for p in files}
    unused = [
        item
        for item in vulture.get_unused_code(min_confidence=60)
        if item.typ in REPORTED and str(item.filename) in product
    ]
    for item in unused:
        print(item.get_report(add_size=False))
    if unused:
        print(f"{len(unused)} unused (remove, or allow in scripts/dead_code.py with the reason)")
        return 1
    print("no dead code found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
