"""The drop-in marks the upstream request's stable prefix (issue 35): a stateless client
resending its history reads all but the new exchange from the provider's cache."""

from __future__ import annotations

import pytest

from tests.support.fake_messages_api import FakeMessagesAPI, message

HOUSE_RULES = "Rule: cite the file, the function and the ticket for every claim. " * 120


@pytest.fixture
def cached_claude(monkeypatch):
    with FakeMessagesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-upstream")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.setenv("LCM_MODEL_CLAUDE_PROVIDER", "anthropic")
        monkeypatch.setenv("LCM_MODEL_CLAUDE_MODEL_ID", "claude-sonnet-fake")
        monkeypatch.setenv("LCM_MODEL_CLAUDE_CONTEXT_LIMIT", "200000")
        yield api


def test_a_stateless_client_reads_its_history_from_the_cache(cached_claude, claude):
    history: list[dict] = []
    for n in range(4):
        cached_claude.enqueue(message(f"Answer {n}: keep handler_{n}() in src/mod_{n}.py."))
        history.append({"role": "user", "content": f"Question {n}: what does handler_{n} do?"})
        reply = claude.messages.create(
            model="claude", system=HOUSE_RULES, messages=history, max_tokens=200
        )
        history.append({"role": "assistant", "content": reply.content[0].text})

    bodies = [r.body for r in cached_claude.requests]
    last = bodies[-1]["messages"][-1]["content"]
    assert "cache_control" in last[-1]  # everything sent is the next request's prefix
    reports = cached_claude.cache_reports
    assert reports[0]["cache_read_input_tokens"] == 0
    for previous, report in zip(reports, reports[1:], strict=False):
        written = previous["cache_read_input_tokens"] + previous["cache_creation_input_tokens"]
        assert report["cache_read_input_tokens"] == written
        assert report["input_tokens"] == 0  # what is new is written for the next request
