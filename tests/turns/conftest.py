"""Fixtures of the turn engine tests: sessions made through the real service, turns run
through the real runner with the offline provider (no key, no network)."""

from __future__ import annotations

import pytest

from turns import runner, services
from turns.jobs import commit_pending
from turns.models import Branch, UserTurn


@pytest.fixture(autouse=True)
def _isolated_engine(settings, monkeypatch, tmp_path):
    """No model config or keys from the environment; journals under a fresh data dir."""
    for name in ("LCM_CONFIG_FILE", "LCM_DEFAULT_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.DATA_DIR = tmp_path
    settings.LCM_LIBRARIAN_MODEL = "haiku"  # no key set: the deterministic librarian


@pytest.fixture
def chat(user):
    return services.session_create(owner=user, title="chat")


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
