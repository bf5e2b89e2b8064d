"""Every provider test starts from a clean environment: no config file, no keys, no
overrides (a developer's shell must not change what these tests see)."""

from __future__ import annotations

import os

import pytest

_CLEARED_PREFIXES = ("LCM_MODEL_", "ANTHROPIC_", "OPENAI_")
_CLEARED = ("LCM_CONFIG_FILE", "LCM_DEFAULT_MODEL", "LCM_REDACTION_HOOK")


@pytest.fixture(autouse=True)
def clean_provider_env(monkeypatch):
    for name in list(os.environ):
        if name in _CLEARED or name.startswith(_CLEARED_PREFIXES):
            monkeypatch.delenv(name)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def anthropic_env(fake_messages_api, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    return fake_messages_api


@pytest.fixture
def openai_env(fake_responses_api, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai-key")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_responses_api.base_url)
    return fake_responses_api


@pytest.fixture
def openai_chat_env(fake_chat_completions_api, monkeypatch):
    """A model `local` on the Chat Completions wire, served by the fake server."""
    monkeypatch.setenv("OPENAI_CHAT_API_KEY", "sk-test-chat-key")
    monkeypatch.setenv("OPENAI_CHAT_BASE_URL", fake_chat_completions_api.base_url)
    monkeypatch.setenv("LCM_MODEL_LOCAL_PROVIDER", "openai_chat")
    monkeypatch.setenv("LCM_MODEL_LOCAL_MODEL_ID", "llama-fake")
    monkeypatch.setenv("LCM_MODEL_LOCAL_CONTEXT_LIMIT", "8000")
    return fake_chat_completions_api
