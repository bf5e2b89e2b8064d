"""Shape of a parsed JSON or YAML value, aggregated by path (`$`, `$.users[*].name`).

The scan is bounded: long arrays are sampled at evenly spaced positions (always including the
first and the last item), objects with very many keys are treated as maps (`$.*`), and the walk
stops after `max_nodes` values or `max_depth` levels. YAML aliases may make a value reachable
many times (or from itself); the bounds keep such documents cheap too.
"""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .budget import Outline, clip, format_number, join_limited

MAP_KEY_THRESHOLD = 50  # an object with more keys than this is summarised as a map
_MAX_KEYS_KEPT = 200
_MAX_SAMPLES = 3
_MAX_DISTINCT = 100


@dataclass
class PathStats:
    count: int = 0
    types: Counter[str] = field(default_factory=Counter)
    keys: dict[str, int] = field(default_factory=dict)  # key -> objects holding it
    more_keys: int = 0  # distinct keys beyond _MAX_KEYS_KEPT
    objects: int = 0
    max_keys: int = 0
    min_length: int | None = None
    max_length: int = 0
    item_types: Counter[str] = field(default_factory=Counter)
    distinct: dict[str, None] = field(default_factory=dict)  # rendered leaves, bounded
    low: float | None = None
    high: float | None = None

    @property
    def samples(self) -> list[str]:
        return list(self.distinct)[:_MAX_SAMPLES]


@dataclass
class Scan:
    paths: dict[str, PathStats] = field(default_factory=dict)
    depth: int = 0
    nodes: int = 0
    sampled: bool = False  # some array items or nodes were not visited


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, datetime.datetime):
        return "datetime"
    if isinstance(value, datetime.date):
        return "date"
    return type(value).__name__


def scan(
    value: Any, *, max_nodes: int = 50_000, max_depth: int = 40, max_items: int = 1000
) -> Scan:
    result = Scan()

    def visit(node: Any, path: str, depth: int) -> None:
        if result.nodes >= max_nodes or depth > max_depth:
            result.sampled = True
            return
        result.nodes += 1
        result.depth = max(result.depth, depth)
        stats = result.paths.setdefault(path, PathStats())
        stats.count += 1
        kind = type_name(node)
        stats.types[kind] += 1
        if isinstance(node, dict):
            _record_object(stats, node)
            as_map = len(node) > MAP_KEY_THRESHOLD
            for key, child in node.items():
                visit(child, f"{path}.*" if as_map else f"{path}.{_key(key)}", depth + 1)
        elif isinstance(node, list | tuple):
            stats.min_length = (
                len(node) if stats.min_length is None else min(stats.min_length, len(node))
            )
            stats.max_length = max(stats.max_length, len(node))
            for index in _sample_indexes(len(node), max_items):
                stats.item_types[type_name(node[index])] += 1
                visit(node[index], f"{path}[*]", depth + 1)
            if len(node) > max_items:
                result.sampled = True
        else:
            _record_leaf(stats, node)

    visit(value, "$", 0)
    return result


def _record_object(stats: PathStats, node: dict[Any, Any]) -> None:
    stats.objects += 1
    stats.max_keys = max(stats.max_keys, len(node))
    for key in node:
        name = _key(key)
        if name in stats.keys:
            stats.keys[name] += 1
        elif len(stats.keys) < _MAX_KEYS_KEPT:
            stats.keys[name] = 1
        else:
            stats.more_keys += 1


def _record_leaf(stats: PathStats, node: Any) -> None:
    if isinstance(node, int | float) and not isinstance(node, bool):
        number = float(node)
        stats.low = number if stats.low is None else min(stats.low, number)
        stats.high = number if stats.high is None else max(stats.high, number)
    if len(stats.distinct) <= _MAX_DISTINCT:
        stats.distinct.setdefault(_render_leaf(node), None)


def _key(key: Any) -> str:
    return clip(str(key), 40)


def _sample_indexes(length: int, limit: int) -> list[int]:
    if length <= limit:
        return list(range(length))
    return sorted({round(i * (length - 1) / (limit - 1)) for i in range(limit)})


def _render_leaf(value: Any) -> str:
    if isinstance(value, str):
        return '"' + clip(value, 40) + '"'
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return clip(str(value), 40)


def _types(counter: Counter[str]) -> str:
    return "|".join(name for name, _ in counter.most_common()) or "nothing"


def _container_line(path: str, stats: PathStats, paths: dict[str, PathStats]) -> str | None:
    count = f" ×{stats.count:,}" if stats.count > 1 else ""
    if stats.types.get("object"):
        if stats.max_keys > MAP_KEY_THRESHOLD:
            names = join_limited(list(stats.keys), 120)
            values = _types(paths[f"{path}.*"].types) if f"{path}.*" in paths else "nothing"
            return f"{path} map{count} of {values}, up to {stats.max_keys:,} keys ({names})"
        fields = []
        for key, seen in stats.keys.items():
            optional = f"?({seen * 100 // stats.objects}%)" if seen < stats.objects else ""
            child = paths.get(f"{path}.{key}")
            fields.append(f"{key}{optional} {_types(child.types) if child else '…'}")
        listed = join_limited(fields, 400)
        more = f" … (+{stats.more_keys:,} more)" if stats.more_keys else ""
        return f"{path} object{count}: {listed}{more}" if fields else f"{path} object{count}: {{}}"
    if stats.types.get("array"):
        if stats.min_length is None or stats.min_length == stats.max_length:
            length = f"length {stats.max_length:,}"
        else:
            length = f"length {stats.min_length:,}-{stats.max_length:,}"
        items = f" of {_types(stats.item_types)}" if stats.item_types else ""
        return f"{path} array{count} ({length}){items}"
    return None


def render(scanned: Scan, outline: Outline) -> None:
    """Add the structure lines (containers, leaf types, samples) to `outline`."""
    if scanned.sampled:
        outline.add(
            f"Counts (×N) are of the {scanned.nodes:,} values scanned: long arrays are read at "
            "evenly spaced items, very large or deep documents only in part."
        )
    containers = [
        line
        for path, stats in scanned.paths.items()
        if (line := _container_line(path, stats, scanned.paths)) is not None
    ]
    leaves = [
        (path, stats)
        for path, stats in scanned.paths.items()
        if not stats.types.get("object") and not stats.types.get("array")
    ]
    if containers:
        outline.add("Structure:")
        shown = outline.add_all(containers, limit=outline.max_tokens * 2 // 3)
        if shown < len(containers):
            outline.add(f"… {len(containers) - shown:,} more nested paths")
    if leaves and outline.add("Values (type; range or distinct count; samples):"):
        for path, stats in leaves:
            if not outline.add(_leaf_line(path, stats)):
                break


def _leaf_line(path: str, stats: PathStats) -> str:
    parts = [_types(stats.types)]
    if stats.low is not None and stats.high is not None and stats.low != stats.high:
        parts.append(f"{format_number(stats.low)} to {format_number(stats.high)}")
    distinct = len(stats.distinct)
    parts.append(f"{'100+' if distinct > _MAX_DISTINCT else distinct} distinct")
    return f"{path}: {'; '.join(parts)}; e.g. {', '.join(stats.samples)}"
