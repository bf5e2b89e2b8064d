"""Receipts stay with their conversation (docs/receipts.md, "Retention"): archiving its
messages leaves them exact (the replay reads the archived content back), the retention
status counts them, and a hard delete takes them and their blobs away with it."""

from __future__ import annotations

import pytest

from archive.services import segment_archive
from conversations.models import Conversation
from receipts.models import Receipt, ReceiptBlob
from receipts.selectors import replay
from retention.services import retention_status
from security.hard_delete import hard_delete_session
from tests.receipts.calls import offline_calls
from turns.models import Session

pytestmark = pytest.mark.django_db


def test_receipts_stay_exact_when_archived_are_counted_and_go_with_a_hard_delete(
    user, offline_engine, small_chunks, django_capture_on_commit_callbacks
):
    small_chunks.LCM_FRESH_TAIL_COUNT = 2
    small_chunks.LCM_LEAF_MIN_FANOUT = 2
    conversation_id, receipts = offline_calls(user)
    conversation = Conversation.objects.get(pk=conversation_id)
    archived = segment_archive(conversation=conversation, seq_from=1, seq_to=4)
    assert archived.archived >= 1, archived.skipped
    assert all(replay(r).exact for r in receipts)
    status = retention_status(conversations=[conversation])
    assert status["receipts"] == len(receipts)
    assert status["receipt_manifest_bytes"] == sum(len(r.manifest) for r in receipts)
    assert status["receipt_blobs"] >= 1
    session = Session.objects.get(branches__conversation_id=conversation_id)
    with django_capture_on_commit_callbacks(execute=True):
        hard_delete_session(session=session, confirm=str(session.pk), via="test")
    assert not Receipt.objects.filter(conversation_id=conversation_id).exists()
    assert not ReceiptBlob.objects.filter(conversation_id=conversation_id).exists()
