"""The layers of docs/architecture.md hold: the drawn diagram and the import contract agree,
every package is in a layer, and no product package carries benchmark code. The contract
itself is checked by `lint-imports`, which scripts/test runs once before the suites."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
LAYERS = [[name.strip() for name in layer.split("|")] for layer in CONFIG["contracts"][0]["layers"]]
PACKAGES = CONFIG["root_packages"]


def test_every_package_is_in_exactly_one_layer():
    in_layers = [name for layer in LAYERS for name in layer]
    assert sorted(in_layers) == sorted(PACKAGES)
    assert len(set(in_layers)) == len(in_layers)
    on_disk = {
        p.parent.name
        for p in ROOT.glob("*/__init__.py")
        if p.parent.name not in ("tests", "scripts", "docs")
    }
    assert on_disk == set(PACKAGES)


def test_the_drawn_diagram_has_the_contracts_layers_in_order():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    diagram = doc.split("```text", 1)[1].split("```", 1)[0].splitlines()

    def row(name: str) -> int:
        for number, line in enumerate(diagram):
            if re.search(rf"│ {re.escape(name)}\b", line):
                return number
        raise AssertionError(f"{name} is not drawn in docs/architecture.md")

    rows = [[row(name) for name in layer] for layer in LAYERS]
    for upper, lower in zip(rows, rows[1:], strict=False):
        assert max(upper) < min(lower), (upper, lower)
    for layer, numbers in zip(LAYERS, rows, strict=True):  # one layer: one band of boxes
        assert len(set(numbers)) == 1, layer


def test_no_product_package_holds_benchmark_code():
    benchmark_names = re.compile(r"(^|_)bench|^load$|^scale_out$|^longrun$|^recall_fixture$")
    misplaced = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        if package != "benchmarks"
        for path in (ROOT / package).rglob("*.py")
        if benchmark_names.search(path.stem) and "management" not in path.parts
    ]
    assert misplaced == []


def test_every_package_is_installed_by_a_wheel():
    # A package left out of setuptools' find list runs from a checkout and is missing from
    # every wheel built from it.
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    included = {pattern.rstrip("*") for pattern in found["packages"]["find"]["include"]}
    assert set(PACKAGES) <= included
