"""Text files summarized by the model: real HTTP through the anthropic SDK to the local fake
Messages API; failures fall back to the deterministic summary; no lock is held meanwhile."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from conversations.inputs import parse_message
from conversations.models import Conversation, Message
from conversations.services import messages_append
from largefiles.models import LargeFile
from largefiles.textmodel import PROMPT
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.support.fake_messages_api import message, server_error

pytestmark = pytest.mark.usefixtures("large_file_storage")

DOC = "".join(
    f"Chapter {i}\n\nThe committee met on day {i} and agreed on budget item {i}.\n\n"
    for i in range(300)
)


@pytest.fixture
def model(fake_messages_api, monkeypatch, settings):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000
    settings.LCM_SUMMARY_MAX_RETRIES = 0
    settings.LCM_SUMMARY_MODEL = "claude-fake-1"
    return fake_messages_api


def _append(conversation, content: str):
    return messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": content})],
    )[0].message


def test_a_text_file_is_summarized_by_the_model(model, conversation):
    model.enqueue(message("Minutes of 300 committee meetings about the budget."))
    stored = _append(conversation, f'<file name="minutes.txt">{DOC}</file>')
    row = LargeFile.objects.get()
    assert row.exploration_summary.endswith("Minutes of 300 committee meetings about the budget.")
    assert row.exploration_summary.startswith("Text: ")
    assert row.exploration_summary in Message.objects.get(pk=stored.pk).content
    [request] = model.requests
    body = request.body
    assert body["model"] == "claude-fake-1"
    assert body["system"] == PROMPT
    assert DOC[:200] in body["messages"][0]["content"]


def test_a_failing_model_falls_back_to_the_deterministic_summary(model, conversation):
    model.enqueue(server_error(500))
    stored = _append(conversation, f'<file name="minutes.txt">{DOC}</file>')
    row = LargeFile.objects.get()
    assert row.exploration_summary.startswith("Text: 1,200 lines, 4,200 words")
    assert "Beginning:\nChapter 0" in row.exploration_summary
    assert row.id in Message.objects.get(pk=stored.pk).content


def test_code_and_data_never_call_the_model(model, conversation):
    code = "".join(f"def function_{i}(x):\n    return x + {i}\n\n" for i in range(400))
    _append(conversation, f'<file name="big.py">{code}</file>')
    assert model.requests == []
    assert "function_0" in LargeFile.objects.get().exploration_summary


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_no_lock_is_held_while_the_model_writes(model, user):
    """A slow model call on one append does not hold up another append to the same
    conversation: the call happens before the ingest transaction."""
    conversation = Conversation.objects.create(owner=user, session_id="slow", token_budget=1000)
    model.enqueue(message("A slow summary.", delay=2.0))
    finished: dict[str, float] = {}

    def slow() -> None:
        try:
            _append(conversation, f'<file name="minutes.txt">{DOC}</file>')
            finished["file"] = time.monotonic()
        finally:
            connection.close()

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.5)  # the file append is now waiting for the model
    _append(conversation, "a quick message")
    finished["quick"] = time.monotonic()
    thread.join(30)
    assert finished["quick"] < finished["file"]
    contents = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("content", flat=True)
    )
    assert contents[0] == "a quick message"
    assert contents[1].startswith("[LCM File: ")
