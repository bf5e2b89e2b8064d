"""The body template (receipts/codec.py): slots where items' texts stand, blobs for long
literal stretches, and the rebuild that gives the exact bytes back."""

from __future__ import annotations

import hashlib
import json

from receipts import codec

SUMMARY = "The user chose PostgreSQL 16 for the store; é and “quotes” and a \n newline."
MESSAGE = "Please deploy the service to the staging cluster tonight, after the backup."


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _round_trip(body: bytes, texts: list[tuple[int, int, str]]):
    ops = codec.template_of(body, texts, _digest)
    blobs = {op.digest: op.data for op in ops if isinstance(op, codec.Blob)}
    ids = {d: n for n, d in enumerate(blobs, start=1)}
    encoded = codec.encode_template(ops, ids)
    by_id = {ids[d]: data for d, data in blobs.items()}
    table = {(i, t): text for i, t, text in texts}
    rebuilt, spans = codec.rebuild(
        codec.decode_template(encoded), lambda i, t: table.get((i, t)), by_id, lambda s: b"?"
    )
    return ops, encoded, rebuilt, spans


def test_both_escapers_give_the_body_back_byte_for_byte():
    texts = [(0, 0, SUMMARY), (1, 0, MESSAGE)]
    for ascii_only in (False, True):
        body = json.dumps(
            {"system": f"Earlier:\n{SUMMARY}\nEnd.", "messages": [{"content": MESSAGE}]},
            ensure_ascii=ascii_only,
        ).encode()
        ops, encoded, rebuilt, spans = _round_trip(body, texts)
        assert rebuilt == body
        slots = [op for op in ops if isinstance(op, codec.Slot)]
        assert [(s.item, s.ascii_only) for s in slots] == [(0, ascii_only), (1, False)]
        assert [item for _s, _e, item in spans] == [0, 1]
        # the template is the body without the items' texts
        assert len(encoded) < len(body) - len(MESSAGE) - len(SUMMARY) + 16


def test_a_text_not_in_the_body_or_too_short_stays_literal():
    body = json.dumps({"messages": [{"content": "hi"}, {"content": MESSAGE}]}).encode()
    ops, _encoded, rebuilt, _spans = _round_trip(
        body, [(0, 0, "hi"), (1, 0, "not in it at all, really")]
    )
    assert rebuilt == body
    assert not any(isinstance(op, codec.Slot) for op in ops)


def test_long_literal_stretches_become_blobs_cut_where_objects_meet():
    tools = [
        {"name": f"tool_{n}", "description": f"Tool number {n} does a thing. " * 6}
        for n in range(40)
    ]
    body = json.dumps(
        {"tools": tools, "messages": [{"content": MESSAGE}]}, separators=(",", ":")
    ).encode()
    ops, encoded, rebuilt, _spans = _round_trip(body, [(0, 0, MESSAGE)])
    assert rebuilt == body
    blobs = [op for op in ops if isinstance(op, codec.Blob)]
    assert len(blobs) > 1 and sum(len(b.data) for b in blobs) > len(body) // 2
    # one tool changed: the other chunks keep their digests
    tools[30]["description"] = "Changed."
    changed = json.dumps(
        {"tools": tools, "messages": [{"content": MESSAGE}]}, separators=(",", ":")
    ).encode()
    ops2, _e, rebuilt2, _s = _round_trip(changed, [(0, 0, MESSAGE)])
    assert rebuilt2 == changed
    before = {b.digest for b in blobs}
    after = {op.digest for op in ops2 if isinstance(op, codec.Blob)}
    assert len(before & after) >= len(before) - 2


def test_a_missing_item_leaves_its_marker():
    body = json.dumps({"content": MESSAGE}).encode()
    ops = codec.template_of(body, [(0, 0, MESSAGE)], _digest)
    encoded = codec.encode_template(ops, {})
    rebuilt, _spans = codec.rebuild(
        codec.decode_template(encoded), lambda i, t: None, {}, lambda s: b"[gone]"
    )
    assert rebuilt == b'{"content": "[gone]"}'
