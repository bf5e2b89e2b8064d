"""Helpers shared by the console tests: sessions and turns made through the real services
and the real runner (the offline provider answers)."""

from __future__ import annotations

from django.test import Client

from turns import runner
from turns.jobs import commit_pending
from turns.models import Session, UserTurn
from turns.services import session_create, turn_accept

XSS_TEXT = (
    '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2"> javascript:alert(1)'
)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def make_session(user, title: str = "Chat", **fields) -> Session:
    fields.setdefault("default_model", "offline")
    return session_create(owner=user, title=title, **fields)


def send(session: Session, text: str, *, branch=None, commit: bool = False, **fields) -> UserTurn:
    """Accept a turn on the session's active branch (or `branch`) and run it to its end;
    with `commit`, also run the librarian ("commit pending now") so the turn has a state."""
    session.refresh_from_db()
    branch = branch or session.active_branch
    turn = turn_accept(session=session, branch=branch, content=text, **fields)
    turn = runner.run_turn(turn_id=turn.id)
    if commit:
        commit_pending(branch=branch)
        turn.refresh_from_db()
    return turn


def add_tool_step(turn: UserTurn, *, name: str, arguments: dict, output: str) -> None:
    """A stored provider step with a tool call and its result, as the runner records one in
    `enabled` mode (the offline provider never calls tools)."""
    from turns.models import ProviderStep

    ProviderStep.objects.create(
        turn=turn,
        step_index=turn.steps.count(),
        provider="offline",
        model_id="offline",
        request_json={"messages": []},
        normalized_items=[
            {"kind": "tool_call", "call_id": "call_1", "name": name, "arguments": arguments},
            {"kind": "tool_output", "call_id": "call_1", "output": output},
        ],
        outcome={"status": "paused", "reason": "tool_use"},
    )
