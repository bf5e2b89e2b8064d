"""Reads of archived content, with a short in-process cache of decoded segments.

A segment is read, checked against its recorded SHA-256, decoded once and kept for
LCM_ARCHIVE_CACHE_SECONDS (at most LCM_ARCHIVE_CACHE_SEGMENTS segments, least recently
used out first), so an expand over many leaves of one archived range reads each segment
once. Segments of one request are fetched in one query.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict

from django.conf import settings

from archive import segments
from archive.models import Segment, SegmentState
from conversations.models import Message

_lock = threading.Lock()
_cache: OrderedDict[int, tuple[float, segments.LazySegment]] = OrderedDict()


def forget(segment_id: int | None = None) -> None:
    with _lock:
        if segment_id is None:
            _cache.clear()
        else:
            _cache.pop(segment_id, None)


def _cached(segment_id: int) -> segments.LazySegment | None:
    with _lock:
        entry = _cache.get(segment_id)
        if entry is None or entry[0] < time.monotonic():
            return None
        _cache.move_to_end(segment_id)
        return entry[1]


def _keep(segment_id: int, forms: segments.LazySegment) -> None:
    ttl = settings.LCM_ARCHIVE_CACHE_SECONDS
    if ttl <= 0:
        return
    with _lock:
        _cache[segment_id] = (time.monotonic() + ttl, forms)
        _cache.move_to_end(segment_id)
        while len(_cache) > settings.LCM_ARCHIVE_CACHE_SEGMENTS:
            _cache.popitem(last=False)


def segment_read(segment: Segment) -> segments.LazySegment:
    """A segment, verified against its recorded hash, its messages parsed on demand."""
    found = _cached(segment.pk)
    if found is not None:
        return found
    if segment.state == SegmentState.MISSING:
        raise segments.SegmentError(
            f"segment {segment.pk} is marked missing: the content of messages "
            f"{segment.seq_from}-{segment.seq_to} of conversation {segment.conversation_id} is lost"
        )
    try:
        data = segments.read(segment.key)
    except segments.SegmentError:
        # Re-encrypted meanwhile (archive.services.segment_reencrypt switched the row to a
        # new object and deleted this one): read the object the row names now.
        fresh = Segment.objects.filter(pk=segment.pk).first()
        if fresh is None or fresh.key == segment.key:
            raise
        segment = fresh
        data = segments.read(segment.key)
    if hashlib.sha256(data).hexdigest() != segment.sha256:
        raise segments.SegmentError(f"segment {segment.key} does not match its recorded hash")
    lazy = segments.decode_lazy(data)
    _keep(segment.pk, lazy)
    return lazy


def segment_forms(segment: Segment) -> dict[int, dict]:
    """`{message id: canonical form}` of every message of a segment."""
    return {form["id"]: form for form in segment_read(segment).forms()}


def archived_forms(message_ids: list[int]) -> dict[int, dict]:
    """The archive reader of conversations.archive_port: canonical forms of the archived
    messages among `message_ids` (a missing or corrupt segment raises SegmentError). Only
    the lines of the asked messages are parsed."""
    pointers = dict(
        Message.objects.filter(pk__in=message_ids, archived_in__isnull=False).values_list(
            "pk", "archived_in"
        )
    )
    if not pointers:
        return {}
    loaded = {sid: _cached(sid) for sid in set(pointers.values())}
    missing = [sid for sid, lazy in loaded.items() if lazy is None]
    if missing:
        for segment in Segment.objects.filter(pk__in=missing):
            loaded[segment.pk] = segment_read(segment)
    found = {}
    for pk, sid in pointers.items():
        lazy = loaded.get(sid)
        form = lazy.form(pk) if lazy is not None else None
        if form is not None:
            found[pk] = form
    return found
