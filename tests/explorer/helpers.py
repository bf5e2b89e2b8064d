"""Helpers shared by the explorer tests (fixtures live in conftest.py)."""

from __future__ import annotations

from django.test import Client

from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer

XSS_TEXT = (
    '<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2"> javascript:alert(1)'
)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def compact(conversation, mode: str = "full"):
    return compact_conversation(
        conversation_id=conversation.pk, mode=mode, summarizer=DeterministicSummarizer()
    )


def xss_payload(i: int) -> dict:
    return {
        "role": "user" if i % 2 == 0 else "tool",
        "content": f"{i} {XSS_TEXT}",
        "parts": [
            {"part_type": "text", "text_content": f"{i} {XSS_TEXT}"},
            {
                "part_type": "file",
                "file_name": f"{XSS_TEXT}.py",
                "file_url": "javascript:alert(document.cookie)",
                "file_mime": "text/x-python",
            },
        ],
    }
