"""Which conversation a request continues, resent history stored once, forks, and the
partial answer of a client that goes away."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import httpx

from conversations.models import Message, MessagePart
from dropin.models import Thread
from tests.support.fake_chat_completions_api import chat_completion, chat_text_stream


def history(conversation_id: int) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("role", "content")
    )


def ask(oai, messages, key=None):
    headers = {"X-LCM-Conversation": key} if key else {}
    raw = oai.chat.completions.with_raw_response.create(
        model="local", messages=messages, extra_headers=headers
    )
    return raw.parse().choices[0].message.content, raw.headers


def test_a_resent_history_continues_its_conversation_by_prefix(upstreams, oai):
    upstreams.chat.enqueue(chat_completion("A1"), chat_completion("A2"), chat_completion("B1"))
    first, h1 = ask(oai, [{"role": "system", "content": "S"}, {"role": "user", "content": "Q1"}])
    second, h2 = ask(
        oai,
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": first},
            {"role": "user", "content": "Q2"},
        ],
    )
    assert h1["x-lcm-conversation"] == h2["x-lcm-conversation"]
    assert h1["x-lcm-conversation-id"] == h2["x-lcm-conversation-id"]
    assert history(int(h2["x-lcm-conversation-id"])) == [
        ("user", "Q1"),
        ("assistant", "A1"),
        ("user", "Q2"),
        ("assistant", "A2"),
    ]
    # Another system prompt is another conversation.
    _, h3 = ask(oai, [{"role": "system", "content": "T"}, {"role": "user", "content": "Q1"}])
    assert h3["x-lcm-conversation-id"] != h1["x-lcm-conversation-id"]
    assert Thread.objects.count() == 2
    assert Message.objects.count() == 6


def test_a_named_conversation_is_created_on_first_use_and_continued(upstreams, oai):
    upstreams.chat.enqueue(chat_completion("one"), chat_completion("two"))
    _, h1 = ask(oai, [{"role": "user", "content": "hello"}], key="project-x")
    assert h1["x-lcm-conversation"] == "project-x"
    _, h2 = ask(
        oai,
        [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "again"},
        ],
        key="project-x",
    )
    assert h2["x-lcm-forked"] == "false"
    assert h1["x-lcm-conversation-id"] == h2["x-lcm-conversation-id"]
    assert [c for _, c in history(int(h2["x-lcm-conversation-id"]))] == [
        "hello",
        "one",
        "again",
        "two",
    ]


def test_an_edited_early_message_forks_without_touching_the_original(upstreams, oai):
    upstreams.chat.enqueue(*[chat_completion(f"A{i}") for i in range(4)])
    messages = [{"role": "user", "content": "Q0"}]
    for i in range(3):
        answer, headers = ask(oai, messages, key="k")
        messages += [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": f"Q{i + 1}"},
        ]
    original = int(headers["x-lcm-conversation-id"])
    before = history(original)
    assert len(before) == 6

    edited = [{"role": "user", "content": "Q0"}, {"role": "assistant", "content": "A0"}]
    edited += [{"role": "user", "content": "Q1 edited"}]
    answer, forked = ask(oai, edited, key="k")
    assert forked["x-lcm-forked"] == "true"
    assert forked["x-lcm-conversation"] == "k"
    child = Thread.objects.get(conversation_id=int(forked["x-lcm-conversation-id"]))
    assert child.parent.conversation_id == original
    assert child.fork_position == 2
    assert child.active and not child.parent.active
    assert history(original) == before  # nothing overwritten
    assert history(child.conversation_id) == [
        ("user", "Q0"),
        ("assistant", "A0"),
        ("user", "Q1 edited"),
        ("assistant", "A3"),
    ]
    # The key now follows the fork.
    upstreams.chat.enqueue(chat_completion("A4"))
    _, after = ask(
        oai,
        edited + [{"role": "assistant", "content": answer}, {"role": "user", "content": "Q2"}],
        key="k",
    )
    assert after["x-lcm-conversation-id"] == forked["x-lcm-conversation-id"]
    assert after["x-lcm-forked"] == "false"


def _journaled_events(settings) -> list[str]:
    """Event types in the drop-in stream journals, once the journal has reached the OS
    (within the journal's flush interval; the deadline only bounds a broken run)."""
    from turns.journal import read_entries

    directory = Path(settings.DATA_DIR) / "dropin-streams"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        files = list(directory.glob("*.jsonl"))
        entries = [e["event_type"] for f in files for e in read_entries(f)]
        if entries.count("chat.completion.chunk") >= 3:
            return entries
        time.sleep(0.05)
    return []


def _eventually(condition, seconds: float = 30) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class _HeldBack:
    """An upstream stream's events that stop after the first `sent` until `release` is
    set: the client sees its chunks and goes away while the answer is still coming, however
    slow the machine (a stream left to run could finish first, and be stored whole)."""

    def __init__(self, events, sent: int):
        self.events, self.sent = events, sent
        self.release = threading.Event()

    def __iter__(self):
        for index, event in enumerate(self.events):
            if index == self.sent:
                self.release.wait(30)
            yield event


def test_a_client_that_goes_away_leaves_the_partial_answer_marked_incomplete(
    upstreams, live_server, caller, settings
):
    stream = chat_text_stream("abcdefghij", chunks=10, chunk_delay=0.05)
    held = _HeldBack(stream.events, sent=4)  # the role chunk and three content chunks
    upstreams.chat.enqueue(dataclasses.replace(stream, events=held))
    try:
        with (
            httpx.Client(timeout=30) as client,
            client.stream(
                "POST",
                live_server.url + "/openai/v1/chat/completions",
                json={
                    "model": "local",
                    "messages": [{"role": "user", "content": "go"}],
                    "stream": True,
                },
                headers={"Authorization": f"Bearer {caller[1]}"},
            ) as response,
        ):
            assert response.status_code == 200
            seen = 0
            for line in response.iter_lines():
                if line.startswith("data: ") and '"content": "' in line:
                    seen += 1
                    if seen == 3:
                        journaled = _journaled_events(settings)
                        break
    finally:
        held.release.set()  # the client is gone: the next chunk finds it so
    thread = Thread.objects.get()
    assert _eventually(lambda: Message.objects.filter(role="assistant").exists())
    answer = Message.objects.get(conversation_id=thread.conversation_id, role="assistant")
    assert answer.content.startswith("abc")
    assert len(answer.content) < 10
    marker = MessagePart.objects.get(message=answer, part_type="step_finish")
    assert marker.step_reason == "incomplete"
    # The stream was journaled as it went; stored, the journal is gone (removed just after
    # the answer is stored, so it is awaited like the answer).
    assert journaled[0] == "lcm.journal_open"
    assert journaled.count("chat.completion.chunk") >= 3
    streams = Path(settings.DATA_DIR) / "dropin-streams"
    assert _eventually(lambda: not list(streams.glob("*.jsonl")))


def test_an_upstream_stream_that_breaks_ends_with_the_wires_error_event(upstreams, oai, claude):
    import anthropic
    import openai
    import pytest

    upstreams.chat.enqueue(chat_text_stream("abcdefgh", chunks=4).dropped_after(3))
    with pytest.raises(openai.APIError) as caught:
        list(
            oai.chat.completions.create(
                model="local", messages=[{"role": "user", "content": "one"}], stream=True
            )
        )
    assert "the stream ended" in str(caught.value)

    upstreams.chat.enqueue(chat_text_stream("abcdefgh", chunks=4).dropped_after(3))
    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        claude.messages.stream(
            model="local", max_tokens=20, messages=[{"role": "user", "content": "two"}]
        ) as stream,
    ):
        list(stream.text_stream)
    assert caught.value.body["error"]["type"] == "api_error"

    partial = Message.objects.filter(role="assistant").order_by("id")
    assert [m.content for m in partial] == ["abcd", "abcd"]  # role chunk, "ab", "cd"
    assert (
        MessagePart.objects.filter(
            message__in=partial, part_type="step_finish", step_reason="incomplete"
        ).count()
        == 2
    )


def test_a_request_sent_again_after_an_upstream_error_continues_its_conversation(upstreams, oai):
    import openai
    import pytest

    from tests.support.fake_chat_completions_api import chat_error

    upstreams.chat.enqueue(chat_completion("A1"), chat_error(503, "server_error", None, "busy"))
    first, h1 = ask(oai, [{"role": "user", "content": "Q1"}])
    messages = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": first},
        {"role": "user", "content": "Q2"},
    ]
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.with_raw_response.create(model="local", messages=messages)
    upstreams.chat.enqueue(chat_completion("A2"))
    _, h2 = ask(oai, messages)
    assert h2["x-lcm-conversation"] == h1["x-lcm-conversation"]
    assert h2["x-lcm-forked"] == "false"
    assert [c for _, c in history(int(h2["x-lcm-conversation-id"]))] == ["Q1", "A1", "Q2", "A2"]


def test_a_drop_in_conversation_is_an_ordinary_conversation_of_its_owner(
    upstreams, oai, live_server, caller
):
    from tests.factories import UserFactory
    from tests.support.tokens import issue_token

    upstreams.chat.enqueue(chat_completion("stored like any other"))
    _, headers = ask(oai, [{"role": "user", "content": "hello API"}])
    conversation_id = headers["x-lcm-conversation-id"]
    url = f"{live_server.url}/api/v1/conversations/{conversation_id}/messages/"
    mine = httpx.get(url, headers={"Authorization": f"Token {caller[1]}"})
    assert mine.status_code == 200
    assert [m["content"] for m in mine.json()["results"]] == ["hello API", "stored like any other"]
    stranger = issue_token(UserFactory(username="someone-else"))
    assert httpx.get(url, headers={"Authorization": f"Token {stranger}"}).status_code == 404
