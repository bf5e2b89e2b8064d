"""Fixtures of the turn engine tests: sessions made through the real service, turns run
through the real runner with the offline provider (no key, no network)."""

from __future__ import annotations

import pytest

from tests.support.fake_messages_api import FakeMessagesAPI
from turns import runner, services
from turns.jobs import commit_pending
from turns.models import Branch, UserTurn


@pytest.fixture(autouse=True)
def _offline(offline_engine):
    """Every turn test runs offline (tests/conftest.py's `offline_engine`)."""


def send(session, text: str, *, branch: Branch | None = None, commit: bool = False) -> UserTurn:
    """Accept and run one turn to its end (the answer is final, the state not yet
    committed unless `commit`)."""
    branch = branch or Branch.objects.get(pk=session.active_branch_id)
    turn = services.turn_accept(session=session, branch=branch, content=text)
    turn = runner.run_turn(turn_id=turn.id)
    if commit:
        commit_pending(branch=branch)
        turn.refresh_from_db()
    return turn


@pytest.fixture
def cached_anthropic(monkeypatch):
    """A local Anthropic-wire upstream that replays the provider's prompt-cache rule."""
    with FakeMessagesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        yield api
