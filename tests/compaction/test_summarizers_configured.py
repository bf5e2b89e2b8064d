"""Summaries from any configured model (LCM_SUMMARY_PROVIDER_MODEL): a compaction run whose
summaries come from an `openai_chat` model through the real `openai` SDK over local HTTP to
the fake Chat Completions server. Nothing of ours is mocked."""

from __future__ import annotations

import pytest

from compaction.engine import compact_conversation, summarizer_from_settings
from compaction.summarizers import AnthropicSummarizer, DeterministicSummarizer
from compaction.summarizers.model import ModelSummarizer
from conversations.models import Summary
from tests.factories import append_messages
from tests.support.fake_chat_completions_api import chat_completion, chat_error

GOOD = "Users debugged tests/test_cache.py timeouts after v1 deploys.\nExpand for details about: each failing case"


@pytest.fixture
def history(conversation, settings):
    settings.LCM_LEAF_CHUNK_TOKENS = 100_000
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_AUTOCOMPACT_DISABLED = True
    append_messages(conversation, 30)
    return conversation


@pytest.fixture
def local_summaries(local_chat_model, settings):
    settings.LCM_SUMMARY_PROVIDER_MODEL = "local"
    settings.LCM_SUMMARY_MAX_RETRIES = 0
    settings.LCM_SUMMARY_MIN_FIDELITY = 0  # the gate's own tests: test_fidelity_gate.py
    settings.LCM_SUMMARY_MIN_RELATIONS = 0
    return local_chat_model


def test_a_compaction_run_is_summarized_by_an_openai_chat_model(history, local_summaries):
    local_summaries.enqueue(chat_completion(GOOD, model="llama-fake"))

    result = compact_conversation(conversation_id=history.pk)

    assert result.status == "compacted", result.detail
    summary = Summary.objects.get(pk=result.summaries_created[0])
    assert (summary.level, summary.model, summary.content) == ("normal", "llama-fake", GOOD)
    [sent] = local_summaries.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-chat-key"
    assert sent.body["model"] == "llama-fake"
    assert sent.body["messages"][0]["role"] == "system"
    assert sent.body["messages"][1]["role"] == "user"
    assert "tools" not in sent.body


def test_the_configured_model_is_chosen_over_the_anthropic_key(
    local_summaries, monkeypatch, settings
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    summarizer = summarizer_from_settings()
    assert isinstance(summarizer, ModelSummarizer)
    assert not isinstance(summarizer, AnthropicSummarizer)
    assert (summarizer.name, summarizer.model) == ("openai_chat", "llama-fake")


def test_without_the_setting_the_default_path_is_unchanged(monkeypatch, settings):
    settings.LCM_SUMMARY_PROVIDER_MODEL = ""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert isinstance(summarizer_from_settings(), DeterministicSummarizer)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    summarizer = summarizer_from_settings()
    assert isinstance(summarizer, AnthropicSummarizer)
    assert summarizer.model == settings.LCM_SUMMARY_MODEL
    summarizer.close()


def test_the_offline_model_gives_the_deterministic_summarizer(settings):
    settings.LCM_SUMMARY_PROVIDER_MODEL = "offline"
    assert isinstance(summarizer_from_settings(), DeterministicSummarizer)


def test_a_missing_key_fails_the_run_naming_the_variable(history, local_summaries, monkeypatch):
    monkeypatch.delenv("OPENAI_CHAT_API_KEY")

    result = compact_conversation(conversation_id=history.pk)

    assert (result.status, result.error_code) == ("failed", "summarizer_auth")
    assert "OPENAI_CHAT_API_KEY" in result.detail
    assert not Summary.objects.exists()
    assert local_summaries.requests == []


def test_an_unknown_model_name_fails_the_run_naming_the_setting(history, settings):
    settings.LCM_SUMMARY_PROVIDER_MODEL = "nope"

    result = compact_conversation(conversation_id=history.pk)

    assert (result.status, result.error_code) == ("failed", "summarizer_auth")
    assert "LCM_SUMMARY_PROVIDER_MODEL" in result.detail and "'nope'" in result.detail
    assert not Summary.objects.exists()


def test_a_401_from_the_chat_server_is_a_summarizer_auth_failure(history, local_summaries):
    local_summaries.enqueue(chat_error(401, "invalid_request_error", "invalid_api_key", "bad key"))

    result = compact_conversation(conversation_id=history.pk)

    assert (result.status, result.error_code) == ("failed", "summarizer_auth")
    assert not Summary.objects.exists()
