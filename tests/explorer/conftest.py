"""Explorer fixtures: conversations compacted by the real engine (deterministic
summarizer), so pages are tested against lineage the product itself wrote."""

from __future__ import annotations

import pytest

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from tests.factories import ConversationFactory, append_messages


@pytest.fixture
def small_chunks(settings):
    settings.LCM_LEAF_CHUNK_TOKENS = 400
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_CONDENSED_TARGET_TOKENS = 160
    settings.LCM_LEAF_MIN_FANOUT = 4
    settings.LCM_CONDENSED_MIN_FANOUT = 3
    settings.LCM_AUTOCOMPACT_DISABLED = True
    return settings


def compact(conversation, mode: str = "full"):
    return compact_conversation(
        conversation_id=conversation.pk, mode=mode, summarizer=DeterministicSummarizer()
    )


@pytest.fixture
def compacted(user, small_chunks):
    """120 messages compacted into leaves and at least one condensed summary."""
    conversation = ConversationFactory(owner=user, session_id="compacted", title="Compacted")
    append_messages(conversation, 120)
    result = compact(conversation)
    assert result.status == "compacted"
    return conversation
