"""Helpers for the memory tests: append messages through the real ingest service."""

from __future__ import annotations

from conversations.inputs import MessageInput
from conversations.services import messages_append


def append(conversation, *texts: str, role: str = "user") -> list:
    appended = messages_append(
        conversation_id=conversation.pk,
        messages=[MessageInput(role=role, content=text) for text in texts],
    )
    return [a.message for a in appended]


def dialogue(conversation, pairs: list[tuple[str, str]]) -> None:
    messages = []
    for user_text, assistant_text in pairs:
        messages.append(MessageInput(role="user", content=user_text))
        messages.append(MessageInput(role="assistant", content=assistant_text))
    messages_append(conversation_id=conversation.pk, messages=messages)


def run_turn(session, text: str, *, branch=None, **kwargs):
    """Accept and run one turn with the offline provider; returns the finished turn."""
    from turns import runner, services
    from turns.models import Branch

    session.refresh_from_db()
    branch = branch or Branch.objects.get(pk=session.active_branch_id)
    turn = services.turn_accept(session=session, branch=branch, content=text, **kwargs)
    return runner.run_turn(turn_id=turn.id)
