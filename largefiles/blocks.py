"""Find `<file ...>...</file>` blocks in message text, and rewrite chosen ones.

The rules (docs/large-files.md, "Parsing file blocks"):

- An opening tag is `<file` followed by attributes and `>`; attribute values may be double-quoted,
  single-quoted or unquoted, names are case-insensitive, any order, the first of a repeated
  name wins. `<file>` with no attributes is a block with no name.
- Tags pair like brackets: each `</file>` closes the nearest unclosed `<file ...>` before it.
  A block inside another block belongs to the outer block's body and is not reported on its own.
- An opening tag that is malformed (stray quote, `<` inside the tag, `/>`, longer than
  `MAX_TAG_CHARS`), an opening that is never closed, and a `</file>` with nothing to close are
  plain text: they are never an error and nothing is lost.

Parsing is linear in the length of the text: one regular-expression scan finds the candidate
tags, each opening tag is matched with a bounded pattern, and tags are paired with a stack.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# An opening tag longer than this is treated as text; this bounds the work per candidate tag.
MAX_TAG_CHARS = 4096

# Candidate tags: `<file` followed by whitespace, `>` or `/`, or a closing tag.
_CANDIDATE = re.compile(r"<file(?=[\s>/])|</file\s*>")

# A whole opening tag. The pieces cannot overlap (names stop at whitespace, `=`, `>`, quotes),
# so a failed match costs time proportional to the characters it looked at, never more.
_OPEN_TAG = re.compile(
    r"""<file
        (?P<attrs>(?:\s+[^\s=>/"'<`]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>"'=<`]+))?)*)
        \s*>""",
    re.VERBOSE,
)
_ATTR = re.compile(
    r"""(?P<name>[^\s=>/"'<`]+)(?:\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<uq>[^\s>"'=<`]+)))?"""
)
# The XML character references a producer might use when quoting a file name.
_CHAR_REF = re.compile(r"&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|(amp|lt|gt|quot|apos));")
_NAMED_REFS = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}


@dataclass(frozen=True)
class FileBlock:
    """One top-level file block: `text[start:end]` is the whole block, tags included."""

    start: int
    end: int
    name: str | None
    mime: str | None
    body: str  # exactly the text between the opening and the closing tag
    attrs: dict[str, str] = field(default_factory=dict, hash=False, compare=True)


# An opening tag seen while scanning: (tag start, body start, raw attribute text).
_Open = tuple[int, int, str]


def find_file_blocks(text: str) -> list[FileBlock]:
    """Every top-level, well-formed file block in `text`, in order of appearance."""
    pairs: list[tuple[_Open, int, int]] = []  # (opening, close start, close end)
    stack: list[_Open] = []
    pos = 0
    while True:
        found = _CANDIDATE.search(text, pos)
        if found is None:
            break
        if found.group().startswith("</"):
            if stack:
                pairs.append((stack.pop(), found.start(), found.end()))
            pos = found.end()
            continue
        tag = _OPEN_TAG.match(text, found.start(), min(len(text), found.start() + MAX_TAG_CHARS))
        if tag is None:
            pos = found.end()  # malformed: the `<file` stays text; look further on
            continue
        stack.append((found.start(), tag.end(), tag.group("attrs")))
        pos = tag.end()
    return _outermost(text, pairs)


def _outermost(text: str, pairs: list[tuple[_Open, int, int]]) -> list[FileBlock]:
    # Stack pairing yields properly nested pairs; keep those not inside an earlier-starting one.
    blocks: list[FileBlock] = []
    last_end = -1
    for (start, body_start, raw_attrs), close_start, close_end in sorted(pairs):
        if start < last_end:
            continue
        attrs = _parse_attrs(raw_attrs)
        blocks.append(
            FileBlock(
                start=start,
                end=close_end,
                name=attrs.get("name") or None,
                mime=attrs.get("mime") or None,
                body=text[body_start:close_start],
                attrs=attrs,
            )
        )
        last_end = close_end
    return blocks


def _parse_attrs(raw: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for match in _ATTR.finditer(raw):
        name = match.group("name").lower()
        value = next((v for v in match.group("dq", "sq", "uq") if v is not None), "")
        attrs.setdefault(name, _unescape(value))
    return attrs


def _unescape(value: str) -> str:
    if "&" not in value:
        return value

    def replace(ref: re.Match[str]) -> str:
        decimal, hexadecimal, named = ref.groups()
        if named:
            return _NAMED_REFS[named]
        code = int(decimal) if decimal else int(hexadecimal, 16)
        return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else ref.group()

    return _CHAR_REF.sub(replace, value)


def replace_blocks(text: str, replacements: Mapping[int, str]) -> str:
    """`text` with the blocks starting at the given offsets replaced; all else byte-for-byte.

    Keys are `FileBlock.start` values from `find_file_blocks(text)`; a key that is not the start
    of a block is a programming error and raises `ValueError`.
    """
    if not replacements:
        return text
    blocks = {block.start: block for block in find_file_blocks(text)}
    unknown = sorted(set(replacements) - set(blocks))
    if unknown:
        raise ValueError(f"no file block starts at offset(s) {unknown}")
    pieces: list[str] = []
    pos = 0
    for start in sorted(replacements):
        block = blocks[start]
        pieces.append(text[pos : block.start])
        pieces.append(replacements[start])
        pos = block.end
    pieces.append(text[pos:])
    return "".join(pieces)
