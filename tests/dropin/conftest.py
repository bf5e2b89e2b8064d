"""The drop-in's tests: the real server (pytest-django's live_server), the official SDKs
as clients, and upstreams played by the fake servers of all three wires:

- `local`: Chat Completions (`openai_chat`) on fake_chat_completions_api;
- `claude`: Anthropic Messages on fake_messages_api;
- `gpt`: OpenAI Responses on fake_responses_api.
"""

from __future__ import annotations

import os

import anthropic
import openai
import pytest

from tests.factories import UserFactory
from tests.support.tokens import issue_token

_CLEARED_PREFIXES = ("LCM_MODEL_", "ANTHROPIC_", "OPENAI_")
_CLEARED = ("LCM_CONFIG_FILE", "LCM_DEFAULT_MODEL")


@pytest.fixture(autouse=True)
def clean_provider_env(monkeypatch):
    for name in list(os.environ):
        if name in _CLEARED or name.startswith(_CLEARED_PREFIXES):
            monkeypatch.delenv(name)


@pytest.fixture
def upstreams(monkeypatch, fake_chat_completions_api, fake_messages_api, fake_responses_api):
    monkeypatch.setenv("OPENAI_CHAT_API_KEY", "sk-chat-upstream")
    monkeypatch.setenv("OPENAI_CHAT_BASE_URL", fake_chat_completions_api.base_url)
    monkeypatch.setenv("LCM_MODEL_LOCAL_PROVIDER", "openai_chat")
    monkeypatch.setenv("LCM_MODEL_LOCAL_MODEL_ID", "llama-fake")
    monkeypatch.setenv("LCM_MODEL_LOCAL_CONTEXT_LIMIT", "8000")
    monkeypatch.setenv("LCM_MODEL_LOCAL_MAX_OUTPUT_TOKENS", "1024")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-upstream")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    monkeypatch.setenv("LCM_MODEL_CLAUDE_PROVIDER", "anthropic")
    monkeypatch.setenv("LCM_MODEL_CLAUDE_MODEL_ID", "claude-fake")
    monkeypatch.setenv("LCM_MODEL_CLAUDE_CONTEXT_LIMIT", "200000")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-upstream")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_responses_api.base_url)

    class Upstreams:
        chat = fake_chat_completions_api
        messages = fake_messages_api
        responses = fake_responses_api

    return Upstreams


@pytest.fixture
def caller(transactional_db):
    user = UserFactory(username="caller")
    return user, issue_token(user)


@pytest.fixture
def oai(live_server, caller):
    return openai.OpenAI(
        api_key=caller[1], base_url=f"{live_server.url}/openai/v1", max_retries=0, timeout=30
    )


@pytest.fixture
def oai_async(live_server, caller):
    return openai.AsyncOpenAI(
        api_key=caller[1], base_url=f"{live_server.url}/openai/v1", max_retries=0, timeout=30
    )


@pytest.fixture
def claude(live_server, caller):
    return anthropic.Anthropic(
        api_key=caller[1], base_url=f"{live_server.url}/anthropic", max_retries=0, timeout=30
    )


@pytest.fixture
def claude_async(live_server, caller):
    return anthropic.AsyncAnthropic(
        api_key=caller[1], base_url=f"{live_server.url}/anthropic", max_retries=0, timeout=30
    )
