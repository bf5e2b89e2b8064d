"""Checks of the archive (docs/retention.md): every archived message is in exactly one present
active segment of its conversation whose hashes match.

Exactly one holds by construction (`Message.archived_in` names one segment); these checks
find a pointer to no active segment (or to one of another conversation or seq range), a
segment whose object is gone, and one whose object, manifest or per-message hashes differ
from what the database recorded when it was verified."""

from __future__ import annotations

import hashlib

from archive import segments
from archive.models import Segment, SegmentState
from integrity.checks.lineage import MESSAGE
from integrity.checks.scope import Scope, fetch

SEGMENT = Segment._meta.db_table


def unplaced_messages(scope: Scope) -> list[dict]:
    where, params = scope.where("m.conversation_id")
    return fetch(
        f"""SELECT m.conversation_id, m.id AS message_id, m.seq, m.archived_in AS segment_id
            FROM {MESSAGE} m
            WHERE m.archived_in IS NOT NULL{where}
              AND NOT EXISTS (SELECT 1 FROM {SEGMENT} s
                              WHERE s.id = m.archived_in AND s.state IN (%s, %s)
                                AND s.conversation_id = m.conversation_id
                                AND m.seq BETWEEN s.seq_from AND s.seq_to)
            ORDER BY m.conversation_id, m.seq""",
        [*params, SegmentState.ACTIVE, SegmentState.MISSING],
    )


def _active(scope: Scope):
    queryset = Segment.objects.filter(state=SegmentState.ACTIVE).order_by("pk")
    if scope.conversation_id is not None:
        queryset = queryset.filter(conversation_id=scope.conversation_id)
    return queryset


def _problem(segment: Segment, **extra) -> dict:
    return {
        "conversation_id": segment.conversation_id,
        "segment_id": segment.pk,
        "key": segment.key,
        "seq_range": [segment.seq_from, segment.seq_to],
        **extra,
    }


def missing_segments(scope: Scope) -> list[dict]:
    return [_problem(s) for s in _active(scope) if not segments.exists(s.key)]


def corrupt_segments(scope: Scope) -> list[dict]:
    problems = []
    for segment in _active(scope):
        if not segments.exists(segment.key):
            continue  # reported by archive_segment_missing
        try:
            data = segments.read(segment.key)
            if hashlib.sha256(data).hexdigest() != segment.sha256:
                problems.append(_problem(segment, reason="object_hash"))
                continue
            payload = segments.decode(data)
        except segments.SegmentError as error:
            problems.append(_problem(segment, reason=f"unreadable: {error}"))
            continue
        recorded = bytes(segment.message_hashes)
        hashes = b"".join(segments.form_sha256(form) for form in payload["messages"])
        if hashes != recorded:
            problems.append(_problem(segment, reason="message_hash"))
            continue
        pointing = list(
            segment.conversation.messages.filter(archived_in=segment.pk)
            .order_by("seq")
            .values_list("id", flat=True)
        )
        if pointing != [form["id"] for form in payload["messages"]]:
            problems.append(_problem(segment, reason="messages_differ"))
    return problems
