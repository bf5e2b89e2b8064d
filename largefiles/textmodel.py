"""The summarizer model for text files, when one is configured (ANTHROPIC_API_KEY).

A plug-in for `explore(..., summarize_text=...)`: one focused call through the provider
layer (providers/anthropic.py), made before the ingest transaction opens (never under a lock). Any failure falls back
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
        from providers import blocks
        from providers.anthropic import AnthropicProvider
        from providers.base import ProviderRequest
        from providers.config import ModelSpec

        spec = ModelSpec(
            "file-summary",
            "anthropic",
            settings.LCM_SUMMARY_MODEL,
            200_000,
            max(64, max_tokens),
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        )
        provider = AnthropicProvider(
            spec,
            timeout=settings.LCM_SUMMARY_TIMEOUT_SECONDS,
            max_retries=settings.LCM_SUMMARY_MAX_RETRIES,
        )
        reply = provider.complete(
            ProviderRequest(
                model=spec,
                system=PROMPT,
                messages=[blocks.message("user", f"<document>\n{_excerpt(text)}\n</document>")],
                tools=[],
                max_output_tokens=max(64, max_tokens),
                purpose="summary",
            )
        )
        return blocks.rendered_text(reply.blocks)

    return summarize_text
