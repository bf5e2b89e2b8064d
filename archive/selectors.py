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
from archive.models import Segment
from conversations.models import Message

_lock = threading.Lock()
_cache: OrderedDict[int, tuple[float, dict[int, dict]]] = OrderedDict()


def forget(segment_id: int | None = None) -> None:
    with _lock:
        if segment_id is None:
            _cache.clear()
        else:
            _cache.pop(segment_id, None)


def _cached(segment_id: int) -> dict[int, dict] | None:
    with _lock:
        entry = _cache.get(segment_id)
        if entry is None or entry[0] < time.monotonic():
            return None
        _cache.move_to_end(segment_id)
        return entry[1]


def _keep(segment_id: int, forms: dict[int, dict]) -> None:
    ttl = settings.LCM_ARCHIVE_CACHE_SECONDS
    if ttl <= 0:
        return
    with _lock:
        _cache[segment_id] = (time.monotonic() + ttl, forms)
        _cache.move_to_end(segment_id)
        while len(_cache) > settings.LCM_ARCHIVE_CACHE_SEGMENTS:
            _cache.popitem(last=False)


def segment_forms(segment: Segment) -> dict[int, dict]:
    """`{message id: canonical form}` of a segment, verified against its recorded hash."""
    found = _cached(segment.pk)
    if found is not None:
        return found
    data = segments.read(segment.key)
    if hashlib.sha256(data).hexdigest() != segment.sha256:
        raise segments.SegmentError(f"segment {segment.key} does not match its recorded hash")
    forms = {form["id"]: form for form in segments.decode(data)["messages"]}
    _keep(segment.pk, forms)
    return forms


def archived_forms(message_ids: list[int]) -> dict[int, dict]:
    """The archive reader of conversations.archive_port: canonical forms of the archived
    messages among `message_ids` (a missing or corrupt segment raises SegmentError)."""
    pointers = dict(
        Message.objects.filter(pk__in=message_ids, archived_in__isnull=False).values_list(
            "pk", "archived_in"
        )
    )
    if not pointers:
        return {}
    wanted = set(pointers.values())
    found: dict[int, dict] = {}
    missing = [sid for sid in wanted if _cached(sid) is None]
    rows = {s.pk: s for s in Segment.objects.filter(pk__in=missing)} if missing else {}
    for segment_id in wanted:
        forms = _cached(segment_id)
        if forms is None:
            forms = segment_forms(rows[segment_id])
        found.update(forms)
    return {pk: found[pk] for pk in pointers if pk in found}
