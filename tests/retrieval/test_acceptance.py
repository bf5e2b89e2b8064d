"""Acceptance on a real sweep: a 2,000-message conversation with planted facts is fully
compacted by the compaction engine; every fact is still found, expanded and cited."""

from __future__ import annotations

import pytest
from django.test import override_settings

from compaction.engine import compact_conversation
from conversations.models import ContextItem, Message, Summary
from retrieval import selectors
from retrieval.expansion import ExpansionRequest, expansion_run
from retrieval.grep import GrepRequest, grep_for_user
from tests.factories import append_messages, message_payload

pytestmark = pytest.mark.django_db

FACTS = {
    37: ("zeta7919", "the vault 37 access code is zeta7919"),
    401: ("quasar3301", "we agreed the release codename is quasar3301"),
    777: ("hydrant5521", "the broken CI runner lives on host hydrant5521"),
    1203: ("蓝鲸计划", "我们决定把项目代号定为蓝鲸计划，下周开始"),
    1650: ("紫陽花作戦", "次のリリースは紫陽花作戦と呼ぶことにしました"),
    1990: ("obsidian8080", "the last deploy went to obsidian8080 before the freeze"),
}


def planted(i: int) -> dict:
    if i in FACTS:
        return {"role": "user", "content": f"Message {i}: {FACTS[i][1]}"}
    return message_payload(i)


@override_settings(LCM_LEAF_CHUNK_TOKENS=1500, LCM_LEAF_MIN_FANOUT=4, LCM_CONDENSED_MIN_FANOUT=3)
def test_after_a_full_sweep_every_planted_fact_is_found_expanded_and_cited(user, conversation):
    append_messages(conversation, 2000, payload=planted)
    result = compact_conversation(conversation_id=conversation.pk, mode="full")
    assert result.status == "compacted"
    depths = set(Summary.objects.filter(conversation=conversation).values_list("depth", flat=True))
    assert {0, 1, 2} <= depths  # a real DAG, several levels deep

    for seq_index, (needle, _) in sorted(FACTS.items()):
        holder = Message.objects.get(conversation=conversation, seq=seq_index + 1)
        for mode in ("full_text", "regex"):
            hits = grep_for_user(
                user=user,
                request=GrepRequest(
                    query=needle, mode=mode, scope="messages", conversation_id=conversation.pk
                ),
            )
            assert [h["id"] for h in hits] == [holder.pk], (needle, mode)
            covering = hits[0]["covered_by"]
            assert covering is not None and covering.startswith("sum_"), (needle, mode)

            summary = selectors.summary_get_for_user(user=user, summary_id=covering)
            expanded = selectors.expand_summary(
                summary, depth=10, include_messages=True, token_cap=10_000_000
            )
            held = [m for m in expanded.messages if m["id"] == holder.pk]
            assert [m["content"] for m in held] == [holder.content], (needle, mode)

        answer = expansion_run(
            user=user,
            request=ExpansionRequest(
                prompt=f"What do we know about {needle}?",
                query=needle,
                conversation_id=conversation.pk,
            ),
        )
        assert answer["mode"] == "offline"
        assert holder.pk in answer["cited_message_ids"], needle
        assert covering in answer["cited_ids"], needle
        assert needle in answer["answer"], needle

    # Expanding the active context gives back every message, in order, byte for byte.
    recovered: list[tuple[int, str]] = []
    for item in ContextItem.objects.filter(conversation=conversation).order_by("ordinal"):
        if item.item_type == "message":
            message = Message.objects.get(pk=item.message_id)
            recovered.append((message.seq, message.content))
            continue
        expanded = selectors.expand_for_user(
            user=user,
            summary_id=item.summary_id,
            depth=10,
            include_messages=True,
            token_cap=10_000_000,
        )
        assert expanded.truncated is False
        recovered.extend((m["seq"], m["content"]) for m in expanded.messages)
    originals = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", "content")
    )
    assert recovered == originals
