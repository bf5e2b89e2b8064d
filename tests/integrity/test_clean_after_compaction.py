"""The steady state is clean: after real ingest (large files included), real compaction
and expansion, every check reports zero problems, on both databases."""

from __future__ import annotations

import pytest

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from conversations.inputs import parse_message
from conversations.models import ContextItem, Summary
from conversations.services import messages_append
from integrity.models import ScanMode, Trigger
from integrity.services import integrity_scan
from largefiles.models import LargeFile
from retrieval.selectors import expand_for_user
from tests.factories import append_messages
from tests.integrity.seeding import problems

pytestmark = pytest.mark.usefixtures("large_file_storage")


def test_ingest_compaction_and_expansion_leave_no_problem(conversation, user, settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 500
    settings.LCM_LEAF_CHUNK_TOKENS = 256
    settings.LCM_LEAF_MIN_FANOUT = 2
    settings.LCM_CONDENSED_MIN_FANOUT = 2
    append_messages(conversation, 40)
    log = "".join(f"GET /items/{i} 200 12ms\n" for i in range(400))
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": f"<file name=a.log>{log}</file>"})],
    )
    append_messages(conversation, 40, start=41)
    for _ in range(3):
        compact_conversation(
            conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
        )
    assert Summary.objects.filter(conversation=conversation, kind="condensed").exists()
    assert LargeFile.objects.filter(conversation=conversation).count() == 1
    for item in ContextItem.objects.filter(conversation=conversation, item_type="summary"):
        expanded = expand_for_user(
            user=user,
            summary_id=item.summary_id,
            depth=10,
            include_messages=True,
            token_cap=1_000_000,
        )
        assert expanded.messages
    assert problems(conversation.pk, file_grace_seconds=0) == {}
    report = integrity_scan(
        conversation_id=None, mode=ScanMode.SCAN_AND_PLAN, trigger=Trigger.COMMAND
    )
    assert report.total_problems == 0
    assert report.plans.count() == 0


def test_the_file_ids_compaction_carries_onto_summaries_name_stored_files(conversation, settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 500
    settings.LCM_LEAF_CHUNK_TOKENS = 256
    log = "".join(f"GET /items/{i} 200 12ms\n" for i in range(400))
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": f"<file name=a.log>{log}</file>"})],
    )
    append_messages(conversation, 30, start=1)
    compact_conversation(
        conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
    )
    [row] = LargeFile.objects.filter(conversation=conversation)
    carrying = [
        s for s in Summary.objects.filter(conversation=conversation) if row.id in s.file_ids
    ]
    assert len(carrying) >= 1
    assert problems(conversation.pk, file_grace_seconds=0) == {}
