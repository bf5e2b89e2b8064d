"""XML exploration: root element, element paths with counts, attribute names, text samples.

Parsing goes through defusedxml: a document that declares entities (billion laughs, external
entities) or refers to external resources is refused, never expanded or fetched; the caller then
falls back to the text explorer with a note saying why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element, ParseError, tostring

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from .budget import Outline, clip, join_limited

_MAX_ELEMENTS = 200_000  # elements profiled; the total is still counted
_MAX_SAMPLES = 3


class NotXml(ValueError):
    """The content is not well-formed XML, or was refused as unsafe; the message says why."""


@dataclass
class _Path:
    count: int = 0
    attributes: dict[str, list[str]] = field(default_factory=dict)  # name -> sample values
    children: Counter[str] = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)


def explore_xml(content: str) -> str:
    root = _parse(content)
    paths: dict[str, _Path] = {}
    tags: Counter[str] = Counter()
    namespaces: dict[str, None] = {}
    total = depth = 0
    stack: list[tuple[Element, str, int]] = [(root, "", 1)]
    while stack:
        element, parent, level = stack.pop()
        total += 1
        depth = max(depth, level)
        name = _local(element.tag, namespaces)
        tags[name] += 1
        path = f"{parent}/{name}"
        if total > _MAX_ELEMENTS:
            stack.extend((child, path, level + 1) for child in reversed(element))
            continue
        stats = paths.setdefault(path, _Path())
        stats.count += 1
        for attribute, value in element.attrib.items():
            values = stats.attributes.setdefault(_local(attribute, namespaces), [])
            sample = '"' + clip(value, 30) + '"'
            if len(values) < _MAX_SAMPLES and sample not in values:
                values.append(sample)
        for child in element:
            stats.children[_local(child.tag, namespaces)] += 1
        text = (element.text or "").strip()
        if text and len(stats.samples) < _MAX_SAMPLES:
            sample = '"' + clip(text, 40) + '"'
            if sample not in stats.samples:
                stats.samples.append(sample)
        stack.extend((child, path, level + 1) for child in reversed(element))
    return _render(root, paths, tags, namespaces, total, depth)


def _parse(content: str) -> Element:
    try:
        return fromstring(content, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as error:
        raise NotXml(
            f"refused as unsafe XML ({type(error).__name__}); nothing was expanded"
        ) from error
    except ParseError as error:
        raise NotXml(f"not well-formed XML ({error})") from error
    except RecursionError as error:
        raise NotXml("nested too deeply to parse") from error


def _local(tag: object, namespaces: dict[str, None]) -> str:
    if not isinstance(tag, str):  # comments and processing instructions
        return "#node"
    if tag.startswith("{"):
        uri, _, name = tag[1:].partition("}")
        namespaces.setdefault(uri, None)
        return name
    return tag


def _render(
    root: Element,
    paths: dict[str, _Path],
    tags: Counter[str],
    namespaces: dict[str, None],
    total: int,
    depth: int,
) -> str:
    outline = Outline()
    root_name = _local(root.tag, {})
    attributes = ", ".join(_local(a, {}) for a in root.attrib) or "none"
    outline.add(
        f"XML: root <{root_name}> (attributes: {clip(attributes, 200)}); "
        f"{total:,} elements, {len(tags):,} distinct names, depth {depth}."
    )
    if namespaces:
        outline.add(f"Namespaces: {join_limited(list(namespaces), 300)}")
    outline.add("Structure (path ×count; @attribute samples; children ×count; text samples):")
    lines = [_path_line(path, stats) for path, stats in paths.items()]
    shown = outline.add_all(lines, limit=400)
    if shown < len(lines):
        outline.add(f"… {len(lines) - shown:,} more paths")
    counts = [f"{name} {count:,}" for name, count in tags.most_common()]
    outline.add(f"Element counts: {join_limited(counts, 300)}")
    example = _example(root)
    if example is not None:
        outline.add(f"First <{_local(example.tag, {})}>: {clip(_serialize(example), 400)}")
    return outline.text()


def _example(root: Element) -> Element | None:
    """The first child of the root whose name repeats: the record a document is a list of."""
    names = Counter(child.tag for child in root)
    return next((child for child in root if names[child.tag] > 1), None)


def _serialize(element: Element) -> str:
    copy = Element(element.tag, element.attrib)
    copy.text = element.text
    copy.extend(list(element)[:20])  # a bounded example, not the whole subtree
    return tostring(copy, encoding="unicode")


def _path_line(path: str, stats: _Path) -> str:
    parts = [f"{path} ×{stats.count:,}"]
    if stats.attributes:
        attributes = [f"@{name} {'/'.join(values)}" for name, values in stats.attributes.items()]
        parts.append(join_limited(attributes, 200))
    if stats.children:
        children = [f"{name} ×{count:,}" for name, count in stats.children.items()]
        parts.append("children " + join_limited(children, 160))
    if stats.samples:
        parts.append("text " + ", ".join(stats.samples))
    return "; ".join(parts)
