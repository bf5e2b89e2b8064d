"""CSV and TSV exploration: columns, row count, inferred column types, sample values."""

from __future__ import annotations

import csv
import io
import re
import sys
from dataclasses import dataclass, field

from .budget import Outline, clip, format_number, join_limited

_MAX_DISTINCT = 1000  # distinct values tracked per column before saying "1000+"
_LISTED_COLUMNS = 12  # wider tables get a line of column names before the details
PROFILED_CELLS = 200_000  # column types and ranges come from the first rows holding this many
_INT = re.compile(r"^[+-]?\d{1,18}$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
_BOOL = frozenset({"true", "false", "yes", "no", "t", "f", "y", "n"})
# Types from most to least specific; a column takes the most specific one all its values fit.
_ORDER = ("bool", "int", "float", "date", "datetime", "text")


@dataclass
class Column:
    name: str
    fits: set[str] = field(default_factory=lambda: set(_ORDER))
    empty: int = 0
    distinct: dict[str, None] = field(default_factory=dict)
    low: float | None = None
    high: float | None = None
    first_text: str | None = None
    last_text: str | None = None

    def add(self, value: str) -> None:
        value = value.strip()
        if not value:
            self.empty += 1
            return
        if len(self.distinct) <= _MAX_DISTINCT:
            self.distinct.setdefault(clip(value, 40), None)
        if len(self.fits) > 1:
            self.fits &= _fits(value)
        if self.fits & {"int", "float"}:
            number = float(value)
            self.low = number if self.low is None else min(self.low, number)
            self.high = number if self.high is None else max(self.high, number)
        elif self.fits & {"date", "datetime"}:
            self.first_text = value if self.first_text is None else min(self.first_text, value)
            self.last_text = value if self.last_text is None else max(self.last_text, value)

    @property
    def type(self) -> str:
        if len(self.fits) == len(_ORDER):
            return "empty"
        return next(name for name in _ORDER if name in self.fits)

    def describe(self) -> str:
        parts = [self.type]
        if self.type in ("int", "float") and self.low is not None and self.low != self.high:
            parts.append(f"{_number(self.low)} to {_number(self.high)}")
        elif self.type in ("date", "datetime") and self.first_text != self.last_text:
            parts.append(f"{self.first_text} to {self.last_text}")
        distinct = len(self.distinct)
        parts.append(f"{'1,000+' if distinct > _MAX_DISTINCT else f'{distinct:,}'} distinct")
        if self.empty:
            parts.append(f"{self.empty:,} empty")
        quote = '"' if self.type in ("text", "date", "datetime") else ""
        samples = [f"{quote}{value}{quote}" for value in list(self.distinct)[:3]]
        if samples:
            parts.append("e.g. " + ", ".join(samples))
        return f"{self.name} ({'; '.join(parts)})"


def _fits(value: str) -> set[str]:
    fits = {"text"}
    if value.lower() in _BOOL:
        fits.add("bool")
    if _INT.match(value):
        fits |= {"int", "float"}
    elif _FLOAT.match(value):
        fits.add("float")
    if _DATE.match(value):
        fits |= {"date", "datetime"}
    elif _DATETIME.match(value):
        fits.add("datetime")
    return fits


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return format_number(value)


def explore_table(content: str, *, delimiter: str) -> str:
    label = "TSV" if delimiter == "\t" else "CSV"
    csv.field_size_limit(sys.maxsize)
    reader = csv.reader(io.StringIO(content), delimiter=delimiter)
    header = next((row for row in reader if any(cell.strip() for cell in row)), None)
    outline = Outline()
    if header is None:
        outline.add(f"{label}: no rows.")
        return outline.text()
    columns = [Column(clip(name, 60) or f"column {i + 1}") for i, name in enumerate(header)]
    profiled_rows = max(100, PROFILED_CELLS // max(1, len(columns)))
    rows = ragged = 0
    first_rows: list[list[str]] = []
    last_row: list[str] = []
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        rows += 1
        last_row = row
        if len(first_rows) < 3:
            first_rows.append(row)
        if len(row) != len(columns):
            ragged += 1
        if rows <= profiled_rows:
            for column, value in zip(columns, row, strict=False):
                column.add(value)
    shown_delimiter = "tab" if delimiter == "\t" else repr(delimiter)
    profiled = (
        f"; columns profiled on the first {profiled_rows:,} rows" if rows > profiled_rows else ""
    )
    outline.add(
        f"{label}: {rows:,} data rows × {len(columns):,} columns "
        f"(first row taken as the header; delimiter {shown_delimiter}{profiled})."
    )
    if ragged:
        outline.add(f"Rows with a different number of fields than the header: {ragged:,}.")
    if len(columns) > _LISTED_COLUMNS:
        names = [column.name for column in columns]
        outline.add(f"Column names ({len(columns):,}): {join_limited(names, 600)}")
    outline.add("Columns:")
    shown = outline.add_all([column.describe() for column in columns], limit=380)
    if shown < len(columns):
        outline.add(f"… {len(columns) - shown:,} more columns not described")
    samples = [(f"Row {i}", row) for i, row in enumerate(first_rows, start=1)]
    if rows > len(first_rows):
        samples.append((f"Row {rows:,} (last)", last_row))
    for label, row in samples:
        if not outline.add(f"{label}: {clip(' | '.join(row), 200)}"):
            break
    return outline.text()
