"""What every replay test checks: each body a recording upstream received equals the
replay of the receipt of that call, byte for byte."""

from __future__ import annotations

from receipts.models import Receipt
from receipts.selectors import replay


def assert_every_body_replays(received: list[bytes], *, site: str) -> list[Receipt]:
    receipts = list(Receipt.objects.filter(site=site).order_by("id"))
    assert len(receipts) == len(received), (len(receipts), len(received))
    for body, receipt in zip(received, receipts, strict=True):
        rebuilt = replay(receipt)
        assert rebuilt.body == body
        assert rebuilt.exact, rebuilt.note
        assert receipt.body_bytes == len(body)
    return receipts
