from __future__ import annotations

import re

from compaction.engine import compact_conversation
from compaction.models import CompactionRun
from conversations.models import ContextItem, Message, MessagePart, Summary
from tests.compaction.helpers import (
    all_message_ids,
    context_in_message_order,
    context_tokens,
    messages_reachable_from_context,
)
from tests.factories import append_messages


def test_a_full_sweep_compacts_and_keeps_every_message_reachable(conversation, small_chunks):
    append_messages(conversation, 300)
    before = context_tokens(conversation)

    result = compact_conversation(conversation_id=conversation.pk, mode="full")

    assert result.status == "compacted"
    assert result.tokens_before == before
    assert result.tokens_after == context_tokens(conversation)
    assert result.tokens_after < before * 0.3
    assert (
        len(result.summaries_created) == Summary.objects.filter(conversation=conversation).count()
    )
    assert messages_reachable_from_context(conversation) == all_message_ids(conversation)
    assert context_in_message_order(conversation)
    assert Message.objects.filter(conversation=conversation).count() == 300
    run = CompactionRun.objects.get(pk=result.run_id)
    assert run.status == "compacted"
    assert run.summary_ids == result.summaries_created
    assert Summary.objects.filter(conversation=conversation, kind="condensed").exists()


def test_nothing_to_do_is_reported_as_such(conversation, small_chunks):
    append_messages(conversation, 4)

    result = compact_conversation(conversation_id=conversation.pk, mode="full")

    assert result.status == "nothing_to_do"
    assert result.summaries_created == []
    assert result.passes == 0
    assert result.detail.startswith("nothing to do")
    assert not Summary.objects.filter(conversation=conversation).exists()


def test_a_leaf_pass_records_a_compaction_part_on_its_newest_source(conversation, small_chunks):
    append_messages(conversation, 60)

    result = compact_conversation(conversation_id=conversation.pk, mode="incremental")

    leaf = Summary.objects.get(pk=result.summaries_created[0])
    newest = leaf.message_links.order_by("-ordinal").first().message
    part = MessagePart.objects.get(message=newest, part_type="compaction")
    assert part.metadata["summary_id"] == leaf.pk
    assert part.metadata["compaction_run_id"] == result.run_id
    assert part.compaction_auto is False
    assert re.fullmatch(r"sum_[0-9a-f]{16}", leaf.pk)
    assert not ContextItem.objects.filter(
        conversation=conversation, message_id__in=leaf.message_links.values("message_id")
    ).exists()
