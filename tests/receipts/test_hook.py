"""The recording hook for calls made without the providers layer (a pass-through relay,
the repair addendum): the exact bytes given are replayed, whatever serializer wrote them."""

from __future__ import annotations

import json

import pytest

from receipts.context import CallContext
from receipts.items import ItemRef
from receipts.recording import record_upstream_call
from receipts.selectors import receipt_detail, replay
from tests.factories import append_messages

pytestmark = pytest.mark.django_db


def test_a_relayed_body_is_replayed_byte_for_byte(conversation, settings):
    settings.LCM_RECEIPT_PRICES = "claude-relay=3/15"
    append_messages(conversation, 4)
    messages = list(conversation.messages.order_by("seq"))
    # A client's own serializer: ASCII escapes, spaces after separators, keys reordered.
    body = json.dumps(
        {
            "messages": [{"content": m.content + " ☃", "role": m.role} for m in messages],
            "model": "claude-relay",
            "max_tokens": 300,
            "system": "You are a careful assistant. " * 30,
        },
        ensure_ascii=True,
    ).encode()
    receipt = record_upstream_call(
        context=CallContext(
            site="repair",
            conversation_id=conversation.pk,
            items=[ItemRef(kind="message", id=m.pk, reason="input") for m in messages],
        ),
        wire="anthropic",
        model="claude-relay",
        upstream="https://relay.example",
        body=body,
        response={
            "status": "completed",
            "stop": "end_turn",
            "usage": {"input_tokens": 1000, "output_tokens": 10},
        },
        latency_ms=12.5,
    )
    rebuilt = replay(receipt)
    assert rebuilt.body == body and rebuilt.exact
    detail = receipt_detail(receipt)
    assert [i["in_body"] for i in detail["items"]] == [True] * 4
    assert detail["response"]["cost_usd"] == pytest.approx((1000 * 3 + 10 * 15) / 1e6)
    assert detail["parameters"]["max_tokens"] == 300


def test_recording_off_records_nothing(conversation, settings):
    settings.LCM_RECEIPTS = False
    assert (
        record_upstream_call(
            context=CallContext(site="repair", conversation_id=conversation.pk),
            wire="anthropic",
            model="m",
            upstream="u",
            body=b"{}",
        )
        is None
    )
