"""Shared pytest fixtures; `tests/conftest.py` loads them with
`pytest_plugins = ["tests.support.fixtures"]`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_messages_api import FakeMessagesAPI
from tests.support.fake_responses_api import FakeResponsesAPI


@pytest.fixture
def fake_messages_api() -> Iterator[FakeMessagesAPI]:
    """A running fake Anthropic Messages API (see tests/support/fake_messages_api.py);
    point the SDK at `fake_messages_api.base_url` and script it with `.enqueue(...)`."""
    with FakeMessagesAPI() as api:
        yield api


@pytest.fixture
def fake_responses_api() -> Iterator[FakeResponsesAPI]:
    """A running fake OpenAI Responses API (see tests/support/fake_responses_api.py); point
    the SDK (or OPENAI_BASE_URL) at `fake_responses_api.base_url`."""
    with FakeResponsesAPI() as api:
        yield api


@pytest.fixture
def fake_chat_completions_api():
    """A running fake OpenAI Chat Completions API (tests/support/fake_chat_completions_api.py);
    point the SDK (or OPENAI_CHAT_BASE_URL) at `fake_chat_completions_api.base_url`."""
    from tests.support.fake_chat_completions_api import FakeChatCompletionsAPI

    with FakeChatCompletionsAPI() as api:
        yield api


@pytest.fixture
def local_chat_model(fake_chat_completions_api, monkeypatch):
    """A configured model `local` on the Chat Completions wire (`openai_chat`, model id
    `llama-fake`), served by the fake Chat Completions server."""
    monkeypatch.setenv("OPENAI_CHAT_API_KEY", "sk-test-chat-key")
    monkeypatch.setenv("OPENAI_CHAT_BASE_URL", fake_chat_completions_api.base_url)
    monkeypatch.setenv("LCM_MODEL_LOCAL_PROVIDER", "openai_chat")
    monkeypatch.setenv("LCM_MODEL_LOCAL_MODEL_ID", "llama-fake")
    monkeypatch.setenv("LCM_MODEL_LOCAL_CONTEXT_LIMIT", "8000")
    return fake_chat_completions_api
