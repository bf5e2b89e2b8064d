"""Reading receipts: access, lists, a receipt's manifest with its items described, and the
replay (the exact body again, from the stored items and blobs)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import zstandard
from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import Length

from conversations.selectors import conversation_get_for_user
from core.api.errors import NotFound
from receipts import codec, manifest
from receipts.items import REASONS, ItemText, content_hash, read_items, short_hash
from receipts.models import Receipt, ReceiptBlob
from receipts.services import body_digest


def receipt_get_for_user(*, user, receipt_id: str) -> Receipt:
    """A receipt the user may see: one of a conversation they may see (the one access
    checkpoint), or, for staff, one of a call made for no conversation."""
    receipt = Receipt.objects.filter(pk=receipt_id).first()
    if receipt is None:
        raise NotFound(f"receipt {receipt_id} not found")
    if receipt.conversation_id is not None:
        conversation_get_for_user(user=user, conversation_id=receipt.conversation_id)
    elif not getattr(user, "is_staff", False):
        raise NotFound(f"receipt {receipt_id} not found")
    return receipt


def receipts_of_conversation(*, conversation_id: int) -> QuerySet[Receipt]:
    """Oldest first (ids are ULIDs)."""
    return Receipt.objects.filter(conversation_id=conversation_id).defer("manifest").order_by("id")


def receipt_previous(receipt: Receipt) -> Receipt | None:
    """The call before this one in its conversation."""
    if receipt.conversation_id is None:
        return None
    return (
        Receipt.objects.filter(conversation_id=receipt.conversation_id, id__lt=receipt.id)
        .order_by("-id")
        .first()
    )


def receipt_manifest(receipt: Receipt) -> manifest.Manifest:
    return manifest.decode(receipt.manifest)


@dataclass
class Replay:
    body: bytes
    spans: list[tuple[int, int, int]]  # where each item's slot stands: (start, end, item)
    exact: bool  # the rebuilt body has the digest of the body sent
    changed: list[dict]  # items whose stored text changed since the call (redactions)
    missing: list[dict]  # items no longer stored (their slots hold a marker)
    note: str


def replay(receipt: Receipt, *, stored: manifest.Manifest | None = None) -> Replay:
    """The request body sent upstream, rebuilt from the stored items and blobs."""
    stored = stored or receipt_manifest(receipt)
    ops = codec.decode_template(stored.template)
    found = read_items((i.kind, i.id) for i in stored.items)
    blobs = blobs_by_id(sorted({op.blob_id for op in ops if isinstance(op, codec.BlobRef)}))

    def text(item: int, index: int) -> str | None:
        entry = found.get((stored.items[item].kind, stored.items[item].id))
        if entry is None or index >= len(entry.texts):
            return None
        return entry.texts[index]

    def marker(slot: codec.SlotRef) -> bytes:
        item = stored.items[slot.item]
        return f"[missing {item.kind} {item.id}]".encode()

    body, spans = codec.rebuild(ops, text, blobs, marker)
    exact = body_digest(body) == stored.header.get("d")
    changed, missing = [], []
    for item in stored.items:
        entry = found.get((item.kind, item.id))
        if entry is None:
            missing.append({"kind": item.kind, "id": item.id})
        elif short_hash(entry.texts) != item.hash:
            changed.append({"kind": item.kind, "id": item.id, "redacted": entry.redacted})
    return Replay(
        body=body,
        spans=spans,
        exact=exact,
        changed=changed,
        missing=missing,
        note=_note(exact, changed, missing),
    )


def _note(exact: bool, changed: list, missing: list) -> str:
    if exact:
        return "byte-exact: the body sent upstream, rebuilt from the stored items"
    parts = []
    if changed:
        redacted = sum(1 for c in changed if c["redacted"])
        parts.append(
            f"{len(changed)} item(s) changed since the call"
            + (f", {redacted} redacted: the replay shows the redaction marker" if redacted else "")
        )
    if missing:
        parts.append(f"{len(missing)} item(s) no longer stored: the replay shows a marker")
    return "not the body sent: " + ("; ".join(parts) or "a stored blob differs")


def blobs_by_id(ids: list[int]) -> dict[int, bytes]:
    if not ids:
        return {}
    decompressor = zstandard.ZstdDecompressor()
    return {
        pk: decompressor.decompress(bytes(data))
        for pk, data in ReceiptBlob.objects.filter(pk__in=ids).values_list("id", "data")
    }


def receipt_detail(receipt: Receipt, *, stored: manifest.Manifest | None = None) -> dict:
    """The receipt as the API, the explorer and the CLI show it: the call, every item with
    why it is there and where it stands in the body, the budget, what was left out, what
    came back."""
    stored = stored or receipt_manifest(receipt)
    ops = codec.decode_template(stored.template)
    order = codec.slot_order(ops)
    position = {item: n for n, item in enumerate(order)}
    found = read_items((i.kind, i.id) for i in stored.items)
    header = stored.header
    marks = header.get("c") or []
    items = [
        _item_view(n, item, found.get((item.kind, item.id)), position, marks)
        for n, item in enumerate(stored.items)
    ]
    sent_tokens = sum(i.tokens for i in stored.items)
    left_out = [{"kind": k, "id": i} for k, i in stored.left_out]
    return {
        "id": receipt.id,
        "conversation_id": receipt.conversation_id,
        "created_at": receipt.created_at,
        "site": receipt.site,
        "wire": receipt.wire,
        "model": receipt.model,
        "upstream": header.get("u", ""),
        "source": receipt.source,
        "parameters": _parameters(replay(receipt, stored=stored).body),
        "cache_marks": len(marks),
        "body_bytes": receipt.body_bytes,
        "body_digest": header.get("d", ""),
        "stored_bytes": len(receipt.manifest),
        "record_microseconds": header.get("us"),
        "budget": header.get("b", {}),
        "query": header.get("q", ""),
        "notes": header.get("o", {}),
        "items": items,
        "item_tokens": sent_tokens,
        "left_out": left_out,
        "response": {
            "status": receipt.status,
            "stop_reason": header.get("r"),
            "error": header.get("e"),
            "usage": {
                "input_tokens": receipt.input_tokens,
                "output_tokens": receipt.output_tokens,
                "cache_read_input_tokens": receipt.cache_read_tokens,
                "cache_creation_input_tokens": receipt.cache_write_tokens,
            },
            "latency_ms": receipt.latency_ms,
            "cost_usd": receipt.cost_usd,
        },
    }


def _parameters(body: bytes) -> dict:
    """The request's parameters that are no content (scalars at the top of the body; the
    lists and long texts by size)."""
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict = {}
    for key, value in data.items():
        if isinstance(value, bool | int | float) or value is None:
            out[key] = value
        elif isinstance(value, str):
            out[key] = value if len(value) <= 120 else f"<{len(value)} characters>"
        elif isinstance(value, list):
            out[key] = f"<{len(value)} items>"
        elif isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if isinstance(v, bool | int | float | str)}
    return out


def _item_view(
    n: int, item: manifest.Item, entry: ItemText | None, position: dict, marks: list
) -> dict:
    return {
        "index": n,
        "kind": item.kind,
        "id": item.id,
        "version": 1 if entry is None or short_hash(entry.texts) == item.hash else 2,
        "tokens": item.tokens,
        "content_hash": content_hash(entry.texts) if entry else None,
        "unchanged": entry is not None and short_hash(entry.texts) == item.hash,
        "in_body": n in position,
        "body_order": position.get(n),
        "cache_mark_after": n in marks,
        "reason": item.reason,
        "why": _why(item, entry),
        "about": entry.about if entry else {},
    }


def _why(item: manifest.Item, entry: ItemText | None) -> str:
    text = REASONS.get(item.reason, item.reason)
    about = entry.about if entry else {}
    if item.reason == "summary" and about.get("covers"):
        first, last = about["covers"]
        return f"{text}: covers messages #{first}-#{last}"
    if item.reason == "retrieved" and item.score is not None:
        return f"{text} (score {item.score:.3f})"
    return text


def receipts_that_saw(
    *, conversation_id: int, kind: str, item_id, limit: int = 500
) -> list[Receipt]:
    """The calls (newest `limit` of the conversation) whose manifest names the item."""
    seen = []
    rows = Receipt.objects.filter(conversation_id=conversation_id).order_by("-id")[:limit]
    for receipt in rows:
        stored = receipt_manifest(receipt)
        if any(i.kind == kind and i.id == item_id for i in stored.items):
            seen.append(receipt)
    return list(reversed(seen))


def conversation_receipt_bytes(*, conversation_id: int) -> dict:
    """What the receipts of a conversation take: rows, manifest and blob bytes."""
    return receipt_sizes(conversation_ids=[conversation_id])


def receipt_sizes(*, conversation_ids: list[int] | None = None) -> dict:
    """What receipts take (of the given conversations, or all): rows, manifest bytes, and
    the blobs of request parts they share."""
    receipts = Receipt.objects.all()
    blobs = ReceiptBlob.objects.all()
    if conversation_ids is not None:
        receipts = receipts.filter(conversation_id__in=conversation_ids)
        blobs = blobs.filter(conversation_id__in=conversation_ids)
    rows = receipts.aggregate(n=Count("id"), bytes=Sum(Length("manifest")))
    shared = blobs.aggregate(n=Count("id"), bytes=Sum(Length("data")))
    return {
        "receipts": rows["n"] or 0,
        "manifest_bytes": rows["bytes"] or 0,
        "blobs": shared["n"] or 0,
        "blob_bytes": shared["bytes"] or 0,
    }
