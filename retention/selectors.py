"""Reads of retention: a user's or a conversation's policy and what is archived."""

from __future__ import annotations

from archive.models import Segment, SegmentState
from conversations.models import Conversation
from retention.models import RetentionPolicy
from retention.policies import FIELDS, effective_policy, server_policy


def policy_values(policy: RetentionPolicy | None) -> dict | None:
    return None if policy is None else {name: getattr(policy, name) for name in FIELDS}


def user_policy(*, user) -> dict:
    return {
        "policy": policy_values(RetentionPolicy.objects.filter(user=user).first()),
        "server": server_policy().as_dict(),
    }


def conversation_retention(*, conversation: Conversation) -> dict:
    segments = Segment.objects.filter(conversation=conversation, state=SegmentState.ACTIVE)
    ranges = list(segments.order_by("seq_from"))
    return {
        "conversation_id": conversation.pk,
        "policy": policy_values(RetentionPolicy.objects.filter(conversation=conversation).first()),
        "effective": effective_policy(conversation).as_dict(),
        "archived_messages": sum(s.message_count for s in ranges),
        "archived_ranges": [
            {
                name: getattr(s, name)
                for name in (
                    "id",
                    "seq_from",
                    "seq_to",
                    "message_count",
                    "codec",
                    "encrypted",
                    "stored_bytes",
                    "raw_bytes",
                    "created_at",
                )  # fmt: skip
            }
            for s in ranges
        ],
    }
