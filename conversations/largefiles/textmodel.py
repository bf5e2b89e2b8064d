"""The summarizer model for text files, when one is configured (ANTHROPIC_API_KEY).

A plug-in for `explore(..., summarize_text=...)`: one focused call through the anthropic
SDK, made before the ingest transaction opens (never under a lock). Any failure falls back
to the deterministic text summary (the explorer catches it).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from django.conf import settings

PROMPT = (
    "Summarize this document in 200-300 words. Include: what the document is about; key "
    "sections or topics covered; important names, dates and numbers; the document's "
    "structure (chapters, sections). Do not reproduce the document content verbatim."
)
# The model reads the beginning and the end of a very long text, not all of it.
_HEAD_CHARS = 150_000
_TAIL_CHARS = 50_000


def _excerpt(text: str) -> str:
    if len(text) <= _HEAD_CHARS + _TAIL_CHARS:
        return text
    cut = len(text) - _HEAD_CHARS - _TAIL_CHARS
    return f"{text[:_HEAD_CHARS]}\n\n[... {cut:,} characters omitted ...]\n\n{text[-_TAIL_CHARS:]}"


def text_summarizer() -> Callable[[str, int], str] | None:
    """A `summarize_text(text, max_tokens)` using the configured model, or None."""
    api_key = os.environ.get("ANTHROPIC_API_KEY")
    if not api_key:
        return None

    def summarize_text(text: str, max_tokens: int) -> str:
        import anthropic

        client = anthropic.Anthropic(
            api_key=api_key,
            timeout=settings.LCM_SUMMARY_TIMEOUT_SECONDS,
            max_retries=settings.LCM_SUMMARY_MAX_RETRIES,
        )
        try:
            reply = client.messages.create(
                model=settings.LCM_SUMMARY_MODEL,
                max_tokens=max(64, max_tokens),
                system=PROMPT,
                messages=[
                    {"role": "user", "content": f"<document>\n{_excerpt(text)}\n</document>"}
                ],
            )
        finally:
            client.close()
        return "".join(block.text for block in reply.content if block.type == "text")

    return summarize_text
