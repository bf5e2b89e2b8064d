"""Retrieval while compaction rewrites the context (PostgreSQL, real threads)."""

from __future__ import annotations

import threading

import pytest
from django.test import override_settings

from compaction.engine import compact_conversation
from conversations.models import Message
from retrieval import selectors
from retrieval.grep import GrepRequest, grep_for_user
from tests.factories import append_messages, message_payload
from tests.support.concurrent import run_together


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@override_settings(LCM_LEAF_CHUNK_TOKENS=1000, LCM_LEAF_MIN_FANOUT=3, LCM_CONDENSED_MIN_FANOUT=2)
def test_grep_and_expand_stay_consistent_during_a_compaction(user, conversation):
    def payload(i):
        if i == 5:
            return {"role": "user", "content": "the pager rotation secret is walrus4411"}
        return message_payload(i)

    append_messages(conversation, 1200, payload=payload)
    holder = Message.objects.get(conversation=conversation, seq=6)
    done = threading.Event()
    seen: list[str | None] = []
    problems: list[str] = []

    def compact():
        try:
            compact_conversation(conversation_id=conversation.pk, mode="full")
        finally:
            done.set()

    def read():
        while not done.is_set() or len(seen) < 3:
            hits = grep_for_user(
                user=user,
                request=GrepRequest(query="walrus4411", conversation_id=conversation.pk),
            )
            # A summary may quote the fact (summaries say what happened); the message itself
            # must be found exactly once, in every state of the sweep.
            messages = [h for h in hits if h["type"] == "message"]
            if [h["id"] for h in messages] != [holder.pk]:
                problems.append(f"grep returned {hits}")
                return
            quoting = [h["id"] for h in hits if h["type"] == "summary"]
            for summary_id in quoting:
                expanded = selectors.expand_for_user(
                    user=user,
                    summary_id=summary_id,
                    depth=10,
                    include_messages=True,
                    token_cap=10**8,
                )
                if holder.pk not in [m["id"] for m in expanded.messages]:
                    problems.append(f"{summary_id} quotes the fact but does not lead back to it")
                    return
            covering = messages[0]["covered_by"]
            seen.append(covering)
            if covering is None:
                continue
            expanded = selectors.expand_for_user(
                user=user,
                summary_id=covering,
                depth=10,
                include_messages=True,
                token_cap=10**8,
            )
            if holder.pk not in [m["id"] for m in expanded.messages]:
                problems.append(f"{covering} does not lead back to the message")
                return

    run_together(compact, read, timeout=120)
    assert problems == []
    assert seen and seen[-1] is not None  # after the sweep the fact is under a summary
