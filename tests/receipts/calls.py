"""Receipts made the way users make them, for the page and API tests: offline turns of an
`lcm` session (the offline provider is an upstream like any other: its calls are
recorded), then a compaction, then more turns, so a call's diff crosses a summary."""

from __future__ import annotations

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from receipts.models import Receipt
from turns import runner, services
from turns.models import Branch


def offline_calls(owner, *, before: int = 3, after: int = 2) -> tuple[int, list[Receipt]]:
    """(conversation id, its receipts oldest first) after `before` turns, a compaction,
    and `after` more turns."""
    session = services.session_create(owner=owner, title="receipts", context_strategy="lcm")
    branch = Branch.objects.get(pk=session.active_branch_id)
    for i in range(before + after):
        if i == before:
            compact_conversation(
                conversation_id=branch.conversation_id,
                mode="full",
                summarizer=DeterministicSummarizer(),
            )
        text = f"Question {i}: which bridge over the river Douro was finished in {1880 + i}?"
        turn = services.turn_accept(session=session, branch=branch, content=text, model="offline")
        runner.run_turn(turn_id=turn.id)
    receipts = list(Receipt.objects.filter(conversation_id=branch.conversation_id).order_by("id"))
    return branch.conversation_id, receipts
