"""SQL outline: CREATE statements with their columns or arguments, and INSERT/ALTER counts."""

from __future__ import annotations

import bisect
import re
from collections import Counter

from .budget import clip, join_limited
from .code_model import CodeOutline, Definition

_IDENT = r'(?:[\w$]+|"[^"\n]{1,128}"|`[^`\n]{1,128}`|\[[^\]\n]{1,128}\])'
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT}){{0,2}}"
_CREATE = re.compile(
    r"\bcreate\s+(?:or\s+replace\s+)?(?:(?:temp|temporary|unlogged|global|local|unique|"
    r"materialized|recursive|virtual|definer\s*=\s*\S+)\s+)*"
    r"(?P<what>table|view|function|procedure|index|trigger|type|schema|sequence|extension|domain)\s+"
    rf"(?:if\s+not\s+exists\s+)?(?P<name>{_NAME})",
    re.IGNORECASE,
)
_COUNTED = re.compile(
    rf"^\s*(?P<verb>insert\s+into|alter\s+table|update|delete\s+from)\s+(?P<name>{_NAME})"
    r"(?:\s*\((?P<columns>[^)]{0,300})\))?",
    re.I | re.M,
)
_RETURNS = re.compile(r"\s*returns\s+(?P<type>setof\s+[\w.]+|table\s*|[\w.]+(?:\s*\[\])?)", re.I)
_NOT_COLUMNS = frozenset(
    [
        "constraint",
        "primary",
        "foreign",
        "unique",
        "check",
        "key",
        "index",
        "exclude",
        "like",
        "fulltext",
        "spatial",
        "period",
    ]
)
_SCAN_CHARS = 8_000  # how far a parenthesised list or a SELECT is read


def outline_sql(content: str) -> CodeOutline:
    outline = CodeOutline()
    line_starts = [0] + [match.end() for match in re.finditer("\n", content)]
    for match in _CREATE.finditer(content):
        what = match.group("what").upper()
        name = _unquote(match.group("name"))
        detail = _detail(content, match.end(), what)
        line = bisect.bisect_right(line_starts, match.start())
        signature = clip(f"CREATE {what} {name}{detail}", 420)
        outline.definitions.append(Definition(line, name, signature))
    counts = Counter(_counted(match) for match in _COUNTED.finditer(content))
    for statement, count in counts.most_common(10):
        outline.notes.append(f"{statement}: {count:,} statement{'s' if count != 1 else ''}")
    first = _COUNTED.search(content)
    if first is not None:
        line_end = content.find("\n", first.end())
        statement = content[first.start() : line_end if line_end != -1 else len(content)]
        outline.notes.append(f"Example statement: {clip(statement, 200)}")
    return outline


def _counted(match: re.Match[str]) -> str:
    statement = f"{' '.join(match.group('verb').upper().split())} {_unquote(match.group('name'))}"
    columns = match.group("columns")
    return f"{statement} ({clip(_unquote(columns), 120)})" if columns else statement


def _detail(content: str, end: int, what: str) -> str:
    rest = content[end : end + _SCAN_CHARS]
    if what == "TABLE":
        if rest.lstrip().startswith("("):
            items = _split_top_level(_parenthesised(rest)[0])
            columns = [_column(item) for item in items]
            shown = [column for column in columns if column]
            return f" ({join_limited(shown, 400)})"
        return " AS …" if re.match(r"\s*as\b", rest, re.I) else ""
    if what in ("FUNCTION", "PROCEDURE"):
        arguments, after = _parenthesised(rest) if rest.lstrip().startswith("(") else ("", 0)
        returns = _RETURNS.match(rest, after)
        kind = f" RETURNS {' '.join(returns.group('type').split())}" if returns else ""
        return f"({clip(arguments, 120)}){kind}"
    if what == "VIEW":
        select = re.search(r"\bselect\b(?P<list>.*?)\bfrom\b", rest, re.I | re.S)
        if select:
            columns = [_select_name(item) for item in _split_top_level(select.group("list"))]
            return f" (columns: {join_limited([c for c in columns if c], 160)})"
        return ""
    if what == "INDEX":
        target = re.match(
            rf"\s+on\s+(?:only\s+)?(?P<table>{_NAME})\s*(?:using\s+\w+\s*)?", rest, re.I
        )
        if target:
            after = rest[target.end() :]
            columns = _parenthesised(after)[0] if after.startswith("(") else ""
            return f" ON {_unquote(target.group('table'))} ({clip(columns, 80)})"
    return ""


def _parenthesised(text: str) -> tuple[str, int]:
    """The contents of the group `text` starts with (after blanks), and the offset after it."""
    start = text.find("(")
    depth = 0
    quote = ""
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1 : index], index + 1
    return text[start + 1 :], len(text)


def _split_top_level(text: str) -> list[str]:
    items, depth, current, quote = [], 0, [], ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    items.append("".join(current).strip())
    return [item for item in items if item]


def _column(item: str) -> str | None:
    """`name TYPE` for a column, `PRIMARY KEY (a, b)`-style text for a table constraint."""
    item = " ".join(re.sub(r"--[^\n]*", "", item).split())
    words = item.split(" ", 1)
    if not words[0]:
        return None
    if words[0].lower() in _NOT_COLUMNS:
        return clip(item, 60)
    return clip(f"{_unquote(words[0])} {words[1] if len(words) > 1 else ''}".strip(), 60)


def _select_name(item: str) -> str:
    alias = re.search(rf"\bas\s+({_IDENT})\s*$", item, re.I)
    if alias:
        return _unquote(alias.group(1))
    last = re.findall(_IDENT, item)
    return clip(_unquote(last[-1]), 40) if last else ""


def _unquote(name: str) -> str:
    return re.sub(r'["`\[\]]', "", " ".join(name.split()))
