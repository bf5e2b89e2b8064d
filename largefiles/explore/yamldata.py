"""YAML exploration: documents, top-level keys and structure; a line outline when it won't parse.

Parsing uses `yaml.safe_load_all` semantics (the C loader when PyYAML has it): no Python objects
are ever constructed. Aliases are references, so an alias "bomb" does not expand in memory, and
the structure scan is bounded (structure.py).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .budget import Outline, clip, join_limited
from .structure import render, scan, type_name

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MAX_DOCUMENTS = 1000
YAML_PARSE_CHARS = 1_000_000  # larger documents are outlined from their lines (parsing is slow)
_TOP_KEY = re.compile(r"^([^\s#\-][^:#]{0,200}):(?:\s|$)")
_CHILD_KEY = re.compile(r"^( {1,8})([^\s#\-][^:#]{0,200}):(?:\s|$)")


def explore_yaml(content: str) -> str:
    if len(content) > YAML_PARSE_CHARS:
        return _outline_by_lines(content, "too large to parse quickly")
    try:
        documents = _load(content)
    except (yaml.YAMLError, RecursionError) as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        return _outline_by_lines(content, f"did not parse{where}")
    outline = Outline()
    if not documents:
        outline.add("YAML: no documents (empty or comments only).")
        return outline.text()
    value: Any = documents[0] if len(documents) == 1 else documents
    scanned = scan(value)
    if len(documents) > 1:
        head = f"YAML: {len(documents):,} documents ($[*] is one document)"
    elif isinstance(value, dict):
        head = f"YAML: one document, a mapping with {len(value):,} top-level keys"
    elif isinstance(value, list):
        head = f"YAML: one document, a sequence of {len(value):,} items"
    else:
        head = f"YAML: one document, a single {type_name(value)}: {clip(str(value), 300)}"
    outline.add(f"{head}; nesting depth {scanned.depth}.")
    if isinstance(value, dict):
        outline.add(f"Top-level keys: {join_limited([str(key) for key in value], 600)}")
    render(scanned, outline)
    return outline.text()


def _load(content: str) -> list[Any]:
    documents = []
    for document in yaml.load_all(content, Loader=_Loader):  # noqa: S506 - a safe loader
        if document is not None:
            documents.append(document)
        if len(documents) >= _MAX_DOCUMENTS:
            break
    return documents


def _outline_by_lines(content: str, reason: str) -> str:
    outline = Outline()
    outline.add(f"YAML ({reason}; outline read from the lines).")
    children: dict[str, list[str]] = {}  # top-level key -> its first child keys
    counts: dict[str, int] = {}  # top-level key -> how many child keys it has
    child_indent: dict[str, str] = {}  # the first child fixes the indentation counted
    current: str | None = None
    for line in content.splitlines():
        line = line[:300]
        if top := _TOP_KEY.match(line):
            current = clip(top.group(1), 60)
            children.setdefault(current, [])
            counts.setdefault(current, 0)
        elif current is not None and (child := _CHILD_KEY.match(line)):
            if child_indent.setdefault(current, child.group(1)) != child.group(1):
                continue
            counts[current] += 1
            if len(children[current]) < 30:
                children[current].append(clip(child.group(2), 40))
    outline.add(f"Top-level keys ({len(children):,}):")
    for key, names in children.items():
        listed = ", ".join(names)
        if counts[key] > len(names):
            listed += f" … (+{counts[key] - len(names):,} more)"
        plural = "" if counts[key] == 1 else "s"
        line = f"{key} ({counts[key]:,} key{plural}): {listed}" if names else key
        if not outline.add(clip(line, 400)):
            break
    return outline.text()
