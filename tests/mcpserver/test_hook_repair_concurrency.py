"""The repair's writes with several writers at once (PostgreSQL: real concurrent
transactions): the PostCompact hook linking a compaction while the transcript's import
links the same one, while the product's own compaction runs on the conversation; two hooks
drawing the repair; two prompts handing it back."""

from __future__ import annotations

import pytest

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from conversations.models import Conversation, Summary
from importers.models import AgentCompactionRepair
from importers.repair import agent_compaction_repair, deliver_once, link_hook_compaction
from importers.services import import_file
from tests.factories import UserFactory
from tests.importers.agent_sessions import SESSION, write_jsonl
from tests.mcpserver.test_hook_repair import THIN, worked_session
from tests.support.concurrent import run_together


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_one_agent_compaction_and_one_delivery_whoever_writes_first(tmp_path):
    user = UserFactory(username="racer")
    records = worked_session(THIN)
    before = [r for r in records if r["uuid"] not in ("s09", "u10")]
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", before)
    import_file(format="claude-code", path=transcript, owner=user)
    write_jsonl(transcript, records)
    conversation = Conversation.objects.get(owner=user, session_id=SESSION)

    run_together(
        lambda: link_hook_compaction(
            owner=user, session_id=SESSION, summary=THIN, author="claude-code", key="k"
        ),
        lambda: import_file(format="claude-code", path=transcript, owner=user),
        lambda: compact_conversation(
            conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
        ),
        timeout=120,
    )
    agent = Summary.objects.filter(conversation=conversation, model__endswith="(agent compaction)")
    assert agent.count() == 1
    summary = agent.get()

    drawn = run_together(lambda: agent_compaction_repair(summary=summary), times=2)
    assert AgentCompactionRepair.objects.count() == 1
    assert drawn[0].text == drawn[1].text != ""
    handed = run_together(lambda: deliver_once(drawn[0], "UserPromptSubmit"), times=3)
    assert sorted(handed) == [False, False, True]
    assert len(AgentCompactionRepair.objects.get().deliveries) == 1
