"""Receipts of the calls the product makes on its own: the summarizer, the librarian and the
sub-agent expansion. Every body the recording upstream received replays byte for byte, and
each receipt names the stored items the call was built from."""

from __future__ import annotations

import pytest

from compaction.engine import compact_conversation
from compaction.summarizers import AnthropicSummarizer
from conversations.models import Message, Summary
from receipts.selectors import receipt_detail
from tests.factories import append_messages
from tests.receipts.replays import assert_every_body_replays
from tests.support.fake_messages_api import message, tool_use_block
from tests.turns.conftest import send
from turns import services
from turns.jobs import summarize_turn
from turns.librarian import ARTIFACTS, DECISIONS

pytestmark = pytest.mark.django_db

SUMMARY = "Users debugged tests/test_cache.py timeouts after v1 deploys.\nExpand for details about: each failing case"


def test_summarizer_calls_replay_and_name_their_source_messages(
    conversation, fake_messages_api, settings
):
    settings.LCM_LEAF_CHUNK_TOKENS = 100_000
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_SUMMARY_MIN_FIDELITY = 0
    settings.LCM_SUMMARY_MIN_RELATIONS = 0
    append_messages(conversation, 30)
    fake_messages_api.enqueue(message(SUMMARY))
    summarizer = AnthropicSummarizer(
        api_key="sk-test",
        base_url=fake_messages_api.base_url,
        model="claude-summary-test",
        max_retries=0,
        timeout=5.0,
    )
    try:
        compact_conversation(conversation_id=conversation.pk, summarizer=summarizer)
    finally:
        summarizer.close()
    receipts = assert_every_body_replays(
        [r.raw for r in fake_messages_api.requests], site="summary"
    )
    detail = receipt_detail(receipts[0])
    summary = Summary.objects.get(conversation=conversation)
    sources = list(summary.message_links.order_by("ordinal").values_list("message_id", flat=True))
    named = [i["id"] for i in detail["items"]]
    assert named == sources and all(
        i["reason"] == "source" and i["in_body"] for i in detail["items"]
    )
    assert (
        detail["conversation_id"] == conversation.pk
        and detail["response"]["usage"]["output_tokens"]
    )


def test_expansion_calls_replay_and_name_what_the_loop_read(
    api, compacted, monkeypatch, fake_messages_api
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    conversation, dag = compacted
    top, leaf = dag.top[0], dag.leaves[2]
    fake_messages_api.enqueue(
        message(
            content=[
                tool_use_block(
                    "lcm_expand", {"summary_id": leaf.id, "depth": 1, "include_messages": True}
                )
            ]
        ),
        message(f"Case 23 failed (see {leaf.id})."),
    )
    answer = api.post(
        "/api/v1/expansions/", {"prompt": "What failed?", "summary_ids": [top.id]}, format="json"
    )
    assert answer.status_code == 200, answer.content
    receipts = assert_every_body_replays(
        [r.raw for r in fake_messages_api.requests], site="expansion"
    )
    first, second = (receipt_detail(r) for r in receipts)
    assert [(i["kind"], i["id"], i["reason"]) for i in first["items"]] == [
        ("summary", top.id, "expansion")
    ]
    assert receipts[1].conversation_id == conversation.pk
    read = {i["id"] for i in second["items"] if i["reason"] == "tool_loop"}
    assert leaf.id in read or read & set(
        Message.objects.filter(conversation=conversation).values_list("id", flat=True)
    )


def test_librarian_calls_replay_and_name_the_state_and_the_turn(
    chat, monkeypatch, settings, fake_messages_api
):
    turn = send(chat, "We decided to move the cache to redis/cache_v2.py and call `warm_cache()`.")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-librarian")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_messages_api.base_url)
    settings.LCM_LIBRARIAN_MODEL = "haiku"
    good = (
        f"{DECISIONS}\n- We decided to move the cache to redis/cache_v2.py and call warm_cache().\n"
        f"{ARTIFACTS}\n- `redis/cache_v2.py`\n- `warm_cache()`"
    )
    fake_messages_api.enqueue(message(good))
    summarize_turn(turn_id=turn.pk)
    receipts = assert_every_body_replays(
        [r.raw for r in fake_messages_api.requests], site="librarian"
    )
    detail = receipt_detail(receipts[0])
    assert detail["items"][0]["kind"] == "state"
    assert any(i["kind"] == "message" and i["reason"] == "librarian" for i in detail["items"])
    assert detail["source"] == f"turn:{turn.pk}"


@pytest.fixture
def chat(offline_engine):
    from tests.factories import UserFactory

    return services.session_create(owner=UserFactory(), title="chat", context_strategy="state")
