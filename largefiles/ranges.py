"""HTTP conditional and range requests for stored file content (RFC 9110 sections 13-14).

The content of a large file never changes (it is addressed by its SHA-256), so its strong
ETag is that hash and any range of it can be cached forever by a client.

Supported: one range per request (`bytes=a-b`, `bytes=a-`, `bytes=-n`); `If-None-Match`
(304); `If-Range` with the ETag. A request for several ranges, a unit other than bytes, or
a malformed header is answered as if there were no Range header (200), which RFC 9110
allows: we never build multipart/byteranges bodies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive, as in Content-Range


class Unsatisfiable(Exception):
    """The single range asked for lies outside the file: 416."""


def etag_for(sha256: str) -> str:
    return f'"{sha256}"'


def _opaque(tag: str) -> str:
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def none_match(header: str | None, etag: str) -> bool:
    """True when `If-None-Match` names this ETag (weak comparison) or is `*`."""
    if not header:
        return False
    tags = [t.strip() for t in header.split(",")]
    return "*" in tags or any(_opaque(t) == etag for t in tags)


def range_applies(if_range: str | None, etag: str) -> bool:
    """`If-Range` with another validator (a changed ETag or a date) means "send it all"."""
    return not if_range or if_range.strip() == etag


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The one satisfiable range asked for, None to ignore the header, or Unsatisfiable."""
    if not header or "," in header:
        return None
    match = _RANGE.match(header)
    if match is None:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":  # a suffix: the last N bytes
        length = int(last)
        if length == 0 or size == 0:
            raise Unsatisfiable
        return ByteRange(max(0, size - length), size - 1)
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None  # syntactically invalid: ignore (RFC 9110 14.1.1)
    if start >= size:
        raise Unsatisfiable
    return ByteRange(start, min(end, size - 1))
