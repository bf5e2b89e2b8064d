"""Factories. Conversations are plain rows; messages always go through the ingest
service (`append_messages`) so tests exercise the real write path."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from conversations.inputs import parse_message
from conversations.models import Conversation
from conversations.services import messages_append


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-123")


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    owner = factory.SubFactory(UserFactory)
    session_id = factory.Sequence(lambda n: f"session-{n}")
    title = factory.Sequence(lambda n: f"Conversation {n}")
    token_budget = 128000


def message_payload(i: int, *, words: int = 30) -> dict:
    """A realistic agent turn: user asks, assistant answers with a tool call, tool replies."""
    kind = i % 3
    if kind == 0:
        text = f"Message {i}: please check why tests/test_cache.py fails after the deploy of v1.{i}"
        return {"role": "user", "content": text}
    if kind == 1:
        return {
            "role": "assistant",
            "content": f"Message {i}: running the failing test to see the error",
            "parts": [
                {
                    "part_type": "text",
                    "text_content": f"Message {i}: running the failing test to see the error",
                },
                {
                    "part_type": "tool",
                    "tool_name": "bash",
                    "tool_call_id": f"call_{i}",
                    "tool_input": {"command": f"pytest tests/test_cache.py -k case_{i}"},
                    "tool_status": "completed",
                },
            ],
        }
    return {
        "role": "tool",
        "content": f"Message {i}: FAILED tests/test_cache.py::case_{i} - TimeoutError after 30s",
        "parts": [
            {
                "part_type": "tool",
                "tool_name": "bash",
                "tool_call_id": f"call_{i - 1}",
                "tool_output": f"FAILED tests/test_cache.py::case_{i} - TimeoutError after 30s",
                "tool_status": "completed",
            }
        ],
    }


def append_messages(conversation, count: int, *, start: int = 0, payload=message_payload):
    """Append `count` generated messages through the real ingest service."""
    inputs = [parse_message(payload(i)) for i in range(start, start + count)]
    results = []
    for offset in range(0, len(inputs), 1000):
        results.extend(
            messages_append(
                conversation_id=conversation.pk, messages=inputs[offset : offset + 1000]
            )
        )
    return [r.message for r in results]
