"""A stream cut by a dead process: its journal is replayed when the server starts and the
partial answer stored, marked incomplete, after the request's messages."""

from __future__ import annotations

from conversations.models import Message, MessagePart
from dropin import recovery
from dropin.models import Thread
from tests.support.fake_chat_completions_api import chat_completion
from turns.journal import StreamJournal


def chunk(text: str) -> dict:
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "model": "llama-fake",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }


def test_an_abandoned_journal_becomes_an_incomplete_answer(upstreams, oai):
    upstreams.chat.enqueue(chat_completion("first answer"))
    raw = oai.chat.completions.with_raw_response.create(
        model="local", messages=[{"role": "user", "content": "hello"}]
    )
    thread = Thread.objects.get(conversation_id=int(raw.headers["x-lcm-conversation-id"]))
    from dropin.services import AnswerPlace, chain
    from dropin.wires.openai_chat import parse

    asked = parse(
        {
            "model": "local",
            "messages": [
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "first answer"},
                {"role": "user", "content": "and then?"},
            ],
        }
    )
    hashes = chain(asked.system, asked.messages)
    from dropin.services import _append

    _append(thread, asked.messages, hashes, 2)  # the request's new message, as the view does
    place = AnswerPlace(thread.pk, thread.conversation_id, hashes[-1], len(hashes), hashes[1])
    journal = StreamJournal(
        step_id="chatcmpl-crashed",
        provider="openai_chat",
        path=recovery.journal_dir() / "chatcmpl-crashed.jsonl",
    )
    journal.write(recovery.PLACE_EVENT, {"model": "local", **place.__dict__})
    for piece in ("then the ", "tide turned"):
        journal.write("chat.completion.chunk", chunk(piece))
    journal.abandon()  # the process died: no close marker

    assert recovery.recover_journals() == 1
    stored = list(
        Message.objects.filter(conversation_id=thread.conversation_id)
        .order_by("seq")
        .values_list("role", "content")
    )
    assert stored == [
        ("user", "hello"),
        ("assistant", "first answer"),
        ("user", "and then?"),
        ("assistant", "then the tide turned"),
    ]
    last = Message.objects.get(conversation_id=thread.conversation_id, seq=4)
    assert MessagePart.objects.get(message=last, part_type="step_finish").step_reason == (
        "incomplete"
    )
    assert list(recovery.journal_dir().glob("*.jsonl")) == []
    thread.refresh_from_db()
    assert thread.message_count == 4
    assert recovery.recover_journals() == 0  # nothing left, nothing twice
