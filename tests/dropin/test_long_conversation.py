"""A stateless client (resending the whole history every time) holds a 120-turn
conversation (500 with --slow, docs/testing.md) through each wire with a model whose
context limit is 8,000 tokens, served by the fake Chat Completions upstream: every upstream
request stays within the limit, every message is stored exactly once, a fact of turn 3 is
found by lcm_grep, and an edited early message forks."""

from __future__ import annotations

import json

from django.db import connection

from conversations.models import Message
from core.token_estimate import estimate
from dropin.models import Thread
from retrieval.grep import GrepRequest, grep_for_user
from tests.support import suite
from tests.support.fake_chat_completions_api import chat_completion, tool_call

TURNS = suite.count(ci=120, slow_count=500)  # the cost grows with its square
LIMIT = 8000
FACT = "The vault code is PELICAN-4471."


def question(i: int) -> str:
    if i == 3:
        return f"Please remember this for later. {FACT} Now tell me about turn {i}."
    # Long enough that the history passes the 8,000-token window within the CI count.
    return (
        f"Turn {i}: tell me one more thing about the history of bridges, sailing and maps, "
        "and how the harbours, lighthouses, tide tables and coastal charts of each century "
        "changed the way merchants, pilgrims and fishermen planned their long voyages."
    )


def upstream_answer(sizes: list[int]):
    def respond(request):
        body = request.body
        sizes.append(estimate(json.dumps(body["messages"])) + body["max_completion_tokens"])
        last = body["messages"][-1]["content"]
        return chat_completion(f"Answer to: {last[:40]}", prompt_tokens=100, completion_tokens=9)

    return respond


# One wire per database: the suite runs on both (scripts/test), so each wire holds the long
# conversation once, and CI stays under its 12 minutes (the test resends a growing history
# at every turn: minutes per run on this machine at 500 turns).
WIRE_BY_DATABASE = {"sqlite": "openai", "postgresql": "anthropic"}


def test_a_long_stateless_conversation_stays_bounded_and_lossless(
    upstreams, oai, claude, caller, settings, monkeypatch
):
    wire = WIRE_BY_DATABASE[connection.vendor]
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # compaction summarizes offline (deterministic)
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    sizes: list[int] = []
    upstreams.chat.enqueue(*[upstream_answer(sizes) for _ in range(TURNS)])
    history: list[dict] = []
    compacted = []
    for i in range(TURNS):
        history.append({"role": "user", "content": question(i)})
        if wire == "openai":
            raw = oai.chat.completions.with_raw_response.create(
                model="local", messages=history, max_tokens=500
            )
            answer = raw.parse().choices[0].message.content
        else:
            raw = claude.messages.with_raw_response.create(
                model="local", messages=history, max_tokens=500
            )
            answer = raw.parse().content[0].text
        compacted.append(raw.headers["x-lcm-compacted"] == "true")
        history.append({"role": "assistant", "content": answer})

    assert len(sizes) == TURNS
    assert max(sizes) <= LIMIT
    assert compacted[0] is False and compacted[-1] is True
    thread = Thread.objects.get()
    stored = list(
        Message.objects.filter(conversation_id=thread.conversation_id)
        .order_by("seq")
        .values_list("role", "content", "external_id")
    )
    assert len(stored) == 2 * TURNS
    assert len({external_id for _, _, external_id in stored}) == 2 * TURNS
    assert [(role, content) for role, content, _ in stored] == [
        (m["role"], m["content"]) for m in history
    ]
    assert thread.message_count == 2 * TURNS

    hits = grep_for_user(
        user=caller[0],
        request=GrepRequest(query="PELICAN-4471", conversation_id=thread.conversation_id),
    )
    turn3 = [hit for hit in hits if hit["type"] == "message" and hit["seq"] == 7]
    assert len(turn3) == 1 and "PELICAN" in turn3[0]["snippet"]

    # The model reaches the fact through the memory tools (X-LCM-Tools: memory).
    def from_grep(request):
        results = json.loads(request.body["messages"][-1]["content"])["results"]
        hits = [hit for hit in results if hit["type"] == "message" and hit["seq"] == 7]
        return chat_completion("PELICAN-4471" if hits else "not found")

    upstreams.chat.enqueue(
        chat_completion(None, tool_calls=[tool_call("lcm_grep", {"query": "PELICAN"}, "g1")]),
        from_grep,
    )
    asked = history + [{"role": "user", "content": "What is the vault code?"}]
    if wire == "openai":
        reply = oai.chat.completions.create(
            model="local", messages=asked, max_tokens=500, extra_headers={"X-LCM-Tools": "memory"}
        )
        assert reply.choices[0].message.content == "PELICAN-4471"
    else:
        reply = claude.messages.create(
            model="local", messages=asked, max_tokens=500, extra_headers={"X-LCM-Tools": "memory"}
        )
        assert reply.content[0].text == "PELICAN-4471"
    assert Message.objects.filter(conversation_id=thread.conversation_id).count() == 2 * TURNS + 2

    # An edited early message forks; the original keeps its messages.
    upstreams.chat.enqueue(chat_completion("About lighthouses."))
    edited = [dict(m) for m in history[:5]]
    edited[4] = {"role": "user", "content": "Turn 2, edited: what about lighthouses?"}
    if wire == "openai":
        raw = oai.chat.completions.with_raw_response.create(
            model="local", messages=edited, max_tokens=500
        )
    else:
        raw = claude.messages.with_raw_response.create(
            model="local", messages=edited, max_tokens=500
        )
    fork = Thread.objects.get(conversation_id=int(raw.headers["x-lcm-conversation-id"]))
    assert raw.headers["x-lcm-forked"] == "true"
    assert fork.pk != thread.pk
    assert fork.parent_id == thread.pk and fork.fork_position == 4
    assert Message.objects.filter(conversation_id=thread.conversation_id).count() == 2 * TURNS + 2
    assert Message.objects.filter(conversation_id=fork.conversation_id).count() == 6
