"""Print the slowest tests of one or more pytest JUnit XML reports, slowest first, each with
its report's label and its time (set-up, call and tear-down together).

    python scripts/slowest_tests.py 25 sqlite=a.xml postgresql=b.xml

scripts/test prints the 25 slowest of both suites at the end of a run."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def slowest(reports: list[tuple[str, Path]], count: int) -> list[tuple[float, str, str]]:
    rows = []
    for label, path in reports:  # a label may name several reports (one suite in two runs)
        if not path.is_file():
            continue
        for case in ET.parse(path).iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            rows.append((float(case.get("time") or 0), label, name))
    return sorted(rows, reverse=True)[:count]


def main(argv: list[str]) -> int:
    count = int(argv[0])
    reports = [(label, Path(path)) for label, path in (arg.split("=", 1) for arg in argv[1:])]
    rows = slowest(reports, count)
    print(f"== the {len(rows)} slowest tests (both suites; set-up + call + tear-down)")
    for seconds, label, name in rows:
        print(f"{seconds:8.2f}s  {label:<10}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
