"""Text files summarized by any configured model (LCM_SUMMARY_PROVIDER_MODEL): an
`openai_chat` model through the real `openai` SDK over local HTTP to the fake Chat
Completions server; an unusable model falls back to the deterministic summary."""

from __future__ import annotations

import logging

import pytest

from conversations.inputs import parse_message
from conversations.services import messages_append
from largefiles.models import LargeFile
from largefiles.textmodel import PROMPT, text_summarizer
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.support.fake_chat_completions_api import chat_completion

pytestmark = pytest.mark.usefixtures("large_file_storage")

DOC = "".join(
    f"Chapter {i}\n\nThe committee met on day {i} and agreed on budget item {i}.\n\n"
    for i in range(300)
)


@pytest.fixture
def local(local_chat_model, monkeypatch, settings):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000
    settings.LCM_SUMMARY_MAX_RETRIES = 0
    settings.LCM_SUMMARY_PROVIDER_MODEL = "local"
    return local_chat_model


def _append(conversation, content: str):
    return messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": content})],
    )[0].message


def test_a_text_file_is_summarized_by_an_openai_chat_model(local, conversation):
    local.enqueue(chat_completion("Minutes of 300 committee meetings about the budget."))
    _append(conversation, f'<file name="minutes.txt">{DOC}</file>')
    row = LargeFile.objects.get()
    assert row.exploration_summary.startswith("Text: ")
    assert row.exploration_summary.endswith("Minutes of 300 committee meetings about the budget.")
    [request] = local.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "llama-fake"
    assert request.body["messages"][0] == {"role": "system", "content": PROMPT}
    assert DOC[:200] in request.body["messages"][1]["content"]


def test_a_missing_key_is_logged_and_falls_back(local, conversation, monkeypatch, caplog):
    monkeypatch.delenv("OPENAI_CHAT_API_KEY")
    with caplog.at_level(logging.WARNING, logger="lcm.largefiles"):
        _append(conversation, f'<file name="minutes.txt">{DOC}</file>')
    assert LargeFile.objects.get().exploration_summary.startswith("Text: 1,200 lines, 4,200 words")
    assert "OPENAI_CHAT_API_KEY" in caplog.text
    assert local.requests == []


def test_no_model_and_the_offline_model_mean_no_model_call(settings, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    settings.LCM_SUMMARY_PROVIDER_MODEL = ""
    assert text_summarizer() is None
    settings.LCM_SUMMARY_PROVIDER_MODEL = "offline"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    assert text_summarizer() is None
