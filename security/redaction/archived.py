"""Step "archive": archive segments whose messages hold the secret are rewritten.

Each such segment is decoded, its forms redacted (`canonical.rewrite_form`), encoded as
a NEW object, written, read back and verified (every message hash), and then, in one
transaction under the permit, a new segment row takes the old one's place: the messages
point at it and the old row goes; the old object is deleted by the job's sweep step. A crash
leaves either the old segment (and an orphan object, which `lcm_retention apply`
removes) or the new one, never neither. The new row has a new id, so no process's
decoded-segment cache (keyed by segment id) can serve the old content again.
"""

from __future__ import annotations

import hashlib

import ulid
from django.db import transaction

from archive import segments
from archive.models import Segment, SegmentState
from archive.selectors import forget, segment_forms
from conversations.models import Message
from core import crypto
from security.redaction.canonical import rewrite_form
from security.redaction.context import JobContext
from security.redaction.permit import redact_permit


def _in_scope(ctx: JobContext):
    queryset = Segment.objects.filter(
        conversation_id__in=ctx.row.conversation_ids, state=SegmentState.ACTIVE
    ).order_by("pk")
    if ctx.row.selector_kind in ("messages", "span"):
        holding = Message.objects.filter(pk__in=ctx.row.message_ids or [0]).values("archived_in")
        queryset = queryset.filter(pk__in=holding)
    return queryset


def _rewritten(segment: Segment, ctx: JobContext) -> tuple[list[dict], list[int]]:
    forms = list(segment_forms(segment).values())
    changed = [form["id"] for form in forms if rewrite_form(form, ctx)]
    return forms, changed


def _write(segment: Segment, forms: list[dict]) -> tuple[str, bytes, int, list[bytes]]:
    hashes = [segments.form_sha256(form) for form in forms]
    payload = {
        "format": 1,
        "conversation_id": segment.conversation_id,
        "seq_from": segment.seq_from,
        "seq_to": segment.seq_to,
        "manifest": [
            {"id": f["id"], "seq": f["seq"], "sha256": h.hex()}
            for f, h in zip(forms, hashes, strict=True)
        ],
        "messages": forms,
    }
    data, raw_bytes = segments.encode(payload, codec=segment.codec)
    stem = f"{segment.conversation_id}/{segment.seq_from:012d}-{segment.seq_to:012d}"
    key = segments.write(f"{stem}-{ulid.ULID()}.seg".lower(), data)
    stored = segments.read(key)
    check = [segments.form_sha256(f) for f in segments.decode(stored)["messages"]]
    if stored != data or check != hashes:
        segments.delete(key)
        raise segments.SegmentError(f"rewritten segment {key} does not verify")
    return key, data, raw_bytes, hashes


def _switch(segment: Segment, key: str, data: bytes, raw_bytes: int, hashes: list[bytes]) -> None:
    with transaction.atomic(), redact_permit():
        if not Segment.objects.filter(pk=segment.pk, state=SegmentState.ACTIVE).exists():
            raise segments.SegmentError(f"segment {segment.pk} changed while being redacted")
        fresh = Segment.objects.create(
            conversation_id=segment.conversation_id,
            seq_from=segment.seq_from,
            seq_to=segment.seq_to,
            message_count=segment.message_count,
            key=key,
            codec=segment.codec,
            encrypted=crypto.is_encrypted_bytes(data),
            stored_bytes=len(data),
            raw_bytes=raw_bytes,
            sha256=hashlib.sha256(data).hexdigest(),
            message_hashes=b"".join(hashes),
        )
        Message.objects.filter(archived_in=segment.pk).update(archived_in=fresh.pk)
        Segment.objects.filter(pk=segment.pk).delete()


def run(ctx: JobContext) -> dict:
    counts = {"segments": 0, "archived_messages": 0, "superseded": []}
    for segment in list(_in_scope(ctx)):
        forms, changed = _rewritten(segment, ctx)
        if not changed:
            continue
        key, data, raw_bytes, hashes = _write(segment, forms)
        try:
            _switch(segment, key, data, raw_bytes, hashes)
        except BaseException:
            segments.delete(key)
            raise
        forget(segment.pk)
        counts["superseded"].append(segment.key)
        counts["segments"] += 1
        counts["archived_messages"] += len(changed)
        ctx.row.message_ids = sorted(set(ctx.row.message_ids) | set(changed))
    return counts
