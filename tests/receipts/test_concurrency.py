"""Several writers record receipts of one conversation at once, while a compaction runs:
every receipt is written, each shared blob once, and every replay is exact."""

from __future__ import annotations

import json

import pytest

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from receipts.context import CallContext
from receipts.items import ItemRef
from receipts.models import Receipt, ReceiptBlob
from receipts.recording import record_upstream_call
from receipts.selectors import replay
from tests.factories import append_messages
from tests.support.concurrent import run_together

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = "You are the archivist of the harbour office. " * 40  # a blob every call shares


def test_concurrent_writers_and_a_compaction_leave_every_receipt_exact(conversation, small_chunks):
    append_messages(conversation, 60)
    messages = list(conversation.messages.order_by("seq").values_list("id", "role", "content"))

    def call(n: int):
        def record():
            chosen = messages[n : n + 20]
            body = json.dumps(
                {
                    "system": SYSTEM,
                    "messages": [{"role": r, "content": c} for _i, r, c in chosen],
                    "max_tokens": 100 + n,
                },
                separators=(",", ":"),
            ).encode()
            receipt = record_upstream_call(
                context=CallContext(
                    site="other",
                    conversation_id=conversation.pk,
                    items=[ItemRef(kind="message", id=i, reason="input") for i, _r, _c in chosen],
                ),
                wire="anthropic",
                model="m",
                upstream="u",
                body=body,
            )
            return receipt.pk, body

        return record

    def compact():
        compact_conversation(
            conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
        )

    results = run_together(*(call(n) for n in range(8)), compact)
    recorded = [r for r in results if r is not None]
    assert len(recorded) == 8 == Receipt.objects.filter(conversation=conversation).count()
    for pk, body in recorded:
        assert replay(Receipt.objects.get(pk=pk)).body == body
    digests = list(
        ReceiptBlob.objects.filter(conversation=conversation).values_list("digest", flat=True)
    )
    assert len(digests) == len({bytes(d) for d in digests}) >= 1
