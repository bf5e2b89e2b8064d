"""The offline provider's answers stay in the transcript but are not indexed into memory,
and the offline answer quotes the memory retrieved for the user's message (not an earlier
offline answer)."""

from __future__ import annotations

import pytest

from conversations.models import Message
from memory.indexing import index_turn
from memory.models import Chunk
from providers.offline import LABEL
from tests.memory.helpers import run_turn
from turns.jobs import commit_pending

pytestmark = pytest.mark.django_db

FACT = "Note for later: the automobile is stored in the green crate beside the boiler."


def _answer(turn) -> str:
    turn.refresh_from_db()
    return turn.final_assistant_message["rendered_text"]


def test_an_offline_answer_is_kept_in_the_transcript_but_not_indexed(chat):
    turn = run_turn(chat, FACT)
    result = index_turn(turn_id=turn.id)
    chunks = list(Chunk.objects.filter(source_turn=turn))
    assert result.chunks_created == len(chunks) >= 1
    assert any(FACT in c.rendered_text for c in chunks)
    assert not any(LABEL in c.rendered_text for c in chunks)
    transcript = Message.objects.filter(
        conversation_id=turn.branch.conversation_id, external_id__startswith=f"turn:{turn.id}:"
    ).order_by("seq")
    assert [m.role for m in transcript] == ["user", "assistant"]
    assert transcript[1].content.startswith(LABEL)


@pytest.mark.embedding_model
def test_the_offline_answer_quotes_the_memory_retrieved_for_the_users_message(chat, settings):
    # The head state only, each turn committed: the fact is retrieved, not held verbatim
    # (what the context holds is never retrieved again, issue 46).
    settings.LCM_STATE_FOLD_TOKENS = 0
    first = run_turn(chat, FACT)
    commit_pending(branch=chat.active_branch)
    index_turn(turn_id=first.id)
    second = run_turn(chat, "Where did we put the car?")
    commit_pending(branch=chat.active_branch)
    index_turn(turn_id=second.id)
    third = run_turn(chat, "Which crate holds the automobile?")
    for turn in (second, third):
        answer = _answer(turn)
        assert f"Best matching memory: “{FACT}”" in answer, answer
    assert not Chunk.objects.filter(rendered_text__contains=LABEL).exists()
