"""Writing receipts (docs/receipts.md): the one write of this app."""

from __future__ import annotations

import base64
import hashlib
import logging
import time

import zstandard
from django.utils import timezone

from core.ids import new_id
from receipts import codec, manifest
from receipts.context import CallContext
from receipts.items import ItemRef, read_items, short_hash
from receipts.models import Receipt, ReceiptBlob
from receipts.prices import cost_usd

logger = logging.getLogger("receipts")

_CACHE_MARK = b'"cache_control"'


def digest(data: bytes) -> bytes:
    """A blob's key: BLAKE2b-128 of its bytes."""
    return hashlib.blake2b(data, digest_size=16).digest()


def body_digest(body: bytes) -> str:
    """The body's fingerprint in the manifest (BLAKE2b-96, base64): enough to say whether
    a replay is the body sent."""
    return base64.urlsafe_b64encode(hashlib.blake2b(body, digest_size=12).digest()).decode()


def receipt_record(
    *,
    context: CallContext,
    wire: str,
    model: str,
    upstream: str,
    body: bytes,
    response: dict,
    latency_ms: float | None,
    cache_ttl: str = "5m",
) -> Receipt:
    """Write the receipt of one call: the items as references, the body as a template
    over them and over blobs, what came back and its cost."""
    started = time.perf_counter()
    refs = _unique(context.items() if callable(context.items) else context.items)
    found, ops = _template(refs, body)
    items = [_item(ref, found.get((ref.kind, ref.id))) for ref in refs]
    header = _header(context, upstream, body, ops, response, latency_ms)
    usage = response.get("usage") or {}
    # No transaction: a blob is written once per conversation and is harmless alone (an
    # orphan if the receipt's insert fails); each statement commits by itself.
    blob_ids = _store_blobs(context.conversation_id, [o for o in ops if isinstance(o, codec.Blob)])
    header["us"] = round((time.perf_counter() - started) * 1e6)
    stored = manifest.encode(
        manifest.Manifest(
            header=header,
            items=items,
            template=codec.encode_template(ops, blob_ids),
            left_out=[(r.kind, r.id) for r in context.left_out],
        )
    )
    return Receipt.objects.create(
        id=new_id(),
        conversation_id=context.conversation_id,
        created_at=timezone.now(),
        site=context.site,
        wire=wire[:32],
        model=model[:255],
        source=context.source[:80],
        status=str(response.get("status") or "completed")[:16],
        **_usage_columns(usage),
        cost_usd=cost_usd(model=model, wire=wire, usage=usage, cache_ttl=cache_ttl),
        latency_ms=latency_ms,
        body_bytes=len(body),
        item_count=len(items),
        manifest=stored,
    )


def _header(context, upstream, body, ops, response, latency_ms) -> dict:
    """The manifest's small facts (empty ones left out): the body's digest, the upstream,
    the cache marks, budget, query and notes, and what came back that no column holds (the
    stop reason, an error). Parameters are read back from the replayed body, usage and
    latency from the row's columns."""
    header = {
        "d": body_digest(body),
        "u": upstream,
        "c": _cache_marks(body, ops),
        "b": context.budget,
        "q": context.query,
        "o": context.notes,
        "r": response.get("stop"),
        "e": response.get("error"),
    }
    return {k: v for k, v in header.items() if v not in ("", {}, [], None)}


def _usage_columns(usage: dict) -> dict:
    return {
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "cache_read_tokens": usage.get("cache_read_input_tokens"),
        "cache_write_tokens": usage.get("cache_creation_input_tokens"),
    }


def _template(refs: list[ItemRef], body: bytes):
    """The items' texts, read from the store, and the body's template over them. (A
    process cache of texts was tried and removed: a test database reuses ids after a
    rollback, so a cached text could stand for another item's and slot it wrongly.)"""
    keys = [(r.kind, r.id) for r in refs]
    found = read_items(keys)
    return found, codec.template_of(body, _texts(keys, found), digest)


def _texts(keys: list, found: dict) -> list[tuple[int, int, str]]:
    return [
        (n, t, text)
        for n, key in enumerate(keys)
        for t, text in enumerate(found[key].texts if key in found else ())
    ]


def _unique(refs: list[ItemRef]) -> list[ItemRef]:
    """Each item once, where it first stands (a call site may name one twice)."""
    seen: set = set()
    out = []
    for ref in refs:
        key = (ref.kind, ref.id)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return out


def _item(ref: ItemRef, text) -> manifest.Item:
    return manifest.Item(
        kind=ref.kind,
        id=ref.id,
        reason=ref.reason,
        tokens=ref.tokens if ref.tokens is not None else (text.tokens if text else 0),
        hash=short_hash(text.texts) if text else "----",
        score=ref.score,
    )


def _cache_marks(body: bytes, ops: list) -> list[int]:
    """For each cache mark in the body (Anthropic's cache_control), the index of the last
    item before it (-1: before any item)."""
    if _CACHE_MARK not in body:
        return []
    marks, position, last_item = [], 0, -1
    offsets = []
    for op in ops:
        size = len(op) if isinstance(op, bytes) else None
        if isinstance(op, codec.Blob):
            size = len(op.data)
        if isinstance(op, codec.Slot):
            last_item = op.item
            size = 0  # a slot holds item text, never a mark
        offsets.append((position, position + (size or 0), last_item, op))
        position += size or 0
    at = body.find(_CACHE_MARK)
    cursor = 0
    while at != -1:
        while cursor + 1 < len(offsets) and offsets[cursor + 1][0] <= at:
            cursor += 1
        marks.append(offsets[cursor][2] if offsets else -1)
        at = body.find(_CACHE_MARK, at + 1)
    return marks


def _store_blobs(conversation_id: int | None, blobs: list[codec.Blob]) -> dict[bytes, int]:
    """The row id of each blob, inserting the ones this conversation has not stored yet
    (concurrent writers of one blob: one insert wins, both read its id)."""
    if not blobs:
        return {}
    wanted = {b.digest: b for b in blobs}
    ids = _blob_ids(conversation_id, list(wanted))
    missing = [b for d, b in wanted.items() if d not in ids]
    if missing:
        compressor = zstandard.ZstdCompressor(level=9)
        ReceiptBlob.objects.bulk_create(
            [
                ReceiptBlob(
                    conversation_id=conversation_id,
                    digest=b.digest,
                    data=compressor.compress(b.data),
                    size=len(b.data),
                )
                for b in missing
            ],
            ignore_conflicts=True,
        )
        ids.update(_blob_ids(conversation_id, [b.digest for b in missing]))
    return ids


def _blob_ids(conversation_id: int | None, digests: list[bytes]) -> dict[bytes, int]:
    rows = ReceiptBlob.objects.filter(conversation_id=conversation_id, digest__in=digests)
    return {bytes(d): pk for d, pk in rows.values_list("digest", "id")}
