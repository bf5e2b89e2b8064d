"""Shared checks for compaction tests: lineage reachability and context validity, read
straight from the tables (independent of the code under test)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from compaction.summarizers import SourceItem
from conversations.models import ContextItem, Message, SummaryMessage, SummaryParent


def messages_reachable_from_context(conversation) -> set[int]:
    """Message ids reachable from the active context: raw items plus every message under a
    summary item, following summary_parents down to summary_messages."""
    items = list(
        ContextItem.objects.filter(conversation=conversation).values_list(
            "message_id", "summary_id"
        )
    )
    reached = {m for m, _ in items if m is not None}
    frontier = {s for _, s in items if s is not None}
    seen: set[str] = set()
    while frontier:
        seen |= frontier
        reached |= set(
            SummaryMessage.objects.filter(summary_id__in=frontier).values_list(
                "message_id", flat=True
            )
        )
        frontier = (
            set(
                SummaryParent.objects.filter(summary_id__in=frontier).values_list(
                    "parent_summary_id", flat=True
                )
            )
            - seen
        )
    return reached


def all_message_ids(conversation) -> set[int]:
    return set(Message.objects.filter(conversation=conversation).values_list("id", flat=True))


def context_tokens(conversation) -> int:
    return sum(
        ContextItem.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )


def context_in_message_order(conversation) -> bool:
    """Raw messages in the context appear in seq order, after everything they follow."""
    seqs = [
        seq
        for seq in ContextItem.objects.filter(conversation=conversation)
        .order_by("ordinal")
        .values_list("message__seq", flat=True)
        if seq is not None
    ]
    return seqs == sorted(seqs)


T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _call(name: str, call_id: str, given: dict) -> str:
    return f"[tool {name} {call_id}] " + json.dumps(given, sort_keys=True)


def span() -> list[SourceItem]:
    """A small coding session in the stored text form of an imported agent transcript."""
    texts = [
        ("user", "Make the cache expire after 300 seconds and keep at most 5 entries."),
        (
            "assistant",
            "We'll use `CacheStore.evict()` instead of a timer. Reading the config first.\n"
            + _call("Read", "toolu_1", {"file_path": "/repo/src/cache/store.py"}),
        ),
        ("tool", "[tool Read toolu_1]\n    1\tclass CacheStore:\n    2\t    ttl = 60"),
        ("assistant", _call("Bash", "toolu_2", {"command": "cd /repo && python -m pytest -q"})),
        (
            "tool",
            "[tool Bash toolu_2]\nExit code 1\nE   KeyError: 'ttl'\nFAILED tests/test_store.py",
        ),
        (
            "assistant",
            "See https://docs.python.org/3/library/functools.html for the decorator.\n"
            + _call("Bash", "toolu_3", {"command": "git commit -am 'evict' && npm run build"}),
        ),
        ("tool", "[tool Bash toolu_3]\n[main 1a2b3c4] evict\n 1 file changed"),
    ]
    return [
        SourceItem(
            ref=f"msg:{i + 1}",
            kind="message",
            content=text,
            created_at=T0 + timedelta(minutes=i),
            role=role,
        )
        for i, (role, text) in enumerate(texts)
    ]
