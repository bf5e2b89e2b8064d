"""Archived text as grep scans it, kept in the process (issue 43, item 9).

grep with `include_archived` scans the newest segments in scope on every call. Through the
read cache (archive.selectors: at most LCM_ARCHIVE_CACHE_SEGMENTS decoded segments, least
recently used out first) a scan of more segments than that evicted, in order, every
segment it was about to read next: with 72 segments against 64, each grep read, checked,
decompressed and parsed all 72 again. Here each scanned segment is kept as grep needs it,
its messages' searchable texts and their case-folded copy joined into one string, so a
scan first asks that string whether the segment can hold a match at all (all the query's
words, or the literal every match of the regex contains) and reads the messages of only
those that can. Bounded by bytes (LCM_GREP_ARCHIVE_CACHE_MB, least recently used out
first) rather than by segments; keyed by the segment's id and SHA-256, so a segment
rewritten (re-encrypted, redacted) is read again, and one restored or marked missing is no
longer in the scan.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import OrderedDict
from dataclasses import dataclass

from django.conf import settings

from archive.models import Segment
from archive.selectors import segment_read
from conversations.search.query import as_datetime

# The part columns grep searches besides the message's content.
SEARCHED_PART_COLUMNS = ("text_content", "tool_output")
_SEPARATOR = "\n\x00\n"  # between texts in `folded`: no word or literal spans it


@dataclass(frozen=True)
class ArchivedMessage:
    id: int
    conversation_id: int
    seq: int
    created_at: dt.datetime
    texts: tuple[str, ...]  # content first, then the parts' searched columns
    folded: tuple[str, ...]  # the same, case-folded


@dataclass(frozen=True)
class SegmentText:
    messages: tuple[ArchivedMessage, ...]
    folded: str  # every text of every message, case-folded, joined by _SEPARATOR
    size: int  # characters held, for the cache's bound


_lock = threading.Lock()
_cache: OrderedDict[tuple[int, str], SegmentText] = OrderedDict()
_held = [0]


def forget() -> None:
    with _lock:
        _cache.clear()
        _held[0] = 0


def _build(segment: Segment) -> SegmentText:
    messages = []
    for form in segment_read(segment).forms():
        texts = tuple(
            [form["content"]]
            + [p[c] for p in form["parts"] for c in SEARCHED_PART_COLUMNS if p.get(c)]
        )
        messages.append(
            ArchivedMessage(
                id=form["id"],
                conversation_id=form["conversation_id"],
                seq=form["seq"],
                created_at=as_datetime(form["created_at"]),
                texts=texts,
                folded=tuple(t.casefold() for t in texts),
            )
        )
    folded = _SEPARATOR.join(t for m in messages for t in m.folded)
    return SegmentText(tuple(messages), folded, 2 * len(folded))


def segment_text(segment: Segment) -> SegmentText:
    """The segment's searchable text (read through the archive's verified reader once,
    then kept while the byte bound allows)."""
    key = (segment.pk, segment.sha256)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    built = _build(segment)
    bound = settings.LCM_GREP_ARCHIVE_CACHE_MB * 1024 * 1024
    with _lock:
        if key not in _cache and built.size <= bound:
            _cache[key] = built
            _held[0] += built.size
            while _held[0] > bound:
                _, dropped = _cache.popitem(last=False)
                _held[0] -= dropped.size
    return built
