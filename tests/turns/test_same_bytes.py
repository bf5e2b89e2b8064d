"""A message goes out with the same bytes in every request that carries it (issue 35): the
turn that sends it first renders it exactly as every later turn renders it from history,
so consecutive requests share a cacheable prefix. Through the turn engine, the official
`anthropic` SDK and the local fake Messages API that records every request."""

from __future__ import annotations

import json

import pytest

from tests.factories import UserFactory
from tests.support.fake_messages_api import anthropic_text_stream
from turns import runner, services
from turns.models import Phase

TURNS = 50
# What people type: trailing spaces and newlines, leading blanks, tabs, inner runs.
SHAPES = ("{} ", "{}\n", "  {}", "{}\t\n", "{}\n\n  ", "line one  \n{}  ", "{}")


@pytest.fixture(autouse=True)
def _offline_librarian(settings):
    settings.LCM_LIBRARIAN_MODEL = "offline"  # the fake answers turns only


@pytest.fixture
def upstream(cached_anthropic):
    runner._shutting_down.clear()
    return cached_anthropic


def _bytes(message: dict) -> str:
    """A request message's bytes without the cache marks (a mark moves every turn; the
    provider matches prefixes on the content)."""
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    clean = [{k: v for k, v in block.items() if k != "cache_control"} for block in content]
    return json.dumps({"role": message["role"], "content": clean}, sort_keys=True)


@pytest.mark.django_db(transaction=True)
def test_every_past_message_has_the_same_bytes_in_every_request_that_carries_it(upstream):
    chat = services.session_create(
        owner=UserFactory(username="typist"), title="chat", context_strategy="lcm"
    )
    for i in range(TURNS):
        shape = SHAPES[i % len(SHAPES)]
        upstream.enqueue(anthropic_text_stream(shape.format(f"Answer {i}: noted.")))
        chat.refresh_from_db()
        turn = services.turn_accept(
            session=chat,
            branch=chat.active_branch,
            content=shape.format(f"Question {i} about  the ledger"),
            model="sonnet",
        )
        assert runner.run_turn(turn_id=turn.id).phase == Phase.RESPONSE_FINALIZED
    bodies = [r.body for r in upstream.requests]
    assert len(bodies) == TURNS
    # request j carries turns 0..j: user i at 2i, answer i at 2i + 1 (nothing compacted)
    for j, body in enumerate(bodies):
        assert len(body["messages"]) == 2 * j + 1
    first_sent: dict[int, str] = {}
    compared = 0
    for body in bodies:
        for index, message in enumerate(body["messages"]):
            sent = _bytes(message)
            if index in first_sent:
                assert sent == first_sent[index], f"message {index} changed bytes"
                compared += 1
            else:
                first_sent[index] = sent
    assert compared == sum(2 * j - 1 for j in range(1, TURNS))
    # the whitespace that was typed is normalised the same way every time: trailing blanks
    # never reach the provider, in the first request as in the later ones
    for body in bodies:
        for message in body["messages"]:
            for block in message["content"]:
                assert block["text"] == block["text"].strip()
