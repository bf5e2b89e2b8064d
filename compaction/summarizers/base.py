"""The summarizer interface the compaction engine calls.

A summarizer turns a chronological run of sources (raw messages for a leaf, depth-0,
summary; same-depth summaries for a condensed one) into one summary text. It is pure:
no database, no Django settings; the engine passes every value in.

Errors tell the engine what to do next: `SummarizerError` means "this level failed,
escalate" (normal -> aggressive -> `fallback_summary`); `SummarizerAuthError` means
"the credentials are wrong, write nothing and surface it".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

# A span's handles (summarizers/handles.py): kind -> handle -> times seen, last seen last.
Handles = dict[str, dict[str, int]]

__all__ = [
    "SourceItem",
    "SummarizerAuthError",
    "SummarizerError",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
]


@dataclass(frozen=True)
class SourceItem:
    ref: str  # "msg:<seq>" for a message, or a summary id "sum_<16hex>"
    kind: Literal["message", "summary"]
    content: str
    created_at: datetime  # for a summary: its earliest_at
    latest_at: datetime | None = None  # for a summary: its latest_at
    role: str | None = None  # for a message: system|user|assistant|tool

    @classmethod
    def of_message(cls, message) -> SourceItem:
        """A stored message (anything with seq, content, created_at and role) as a source."""
        return cls(
            ref=f"msg:{message.seq}",
            kind="message",
            content=message.content,
            created_at=message.created_at,
            role=message.role,
        )


@dataclass(frozen=True)
class SummaryRequest:
    sources: Sequence[SourceItem]  # in chronological order
    depth: int  # 0 = leaf over messages; d >= 1 condenses depth d-1 summaries
    target_tokens: int  # the level's base target; "aggressive" aims at about half of it
    level: Literal["normal", "aggressive"]
    previous_context: str | None = None  # the most recent earlier summary, for continuity
    conversation_id: int | None = None
    # The sources' handles (summarizers/handles.py), drawn by the engine; None: draw them.
    handles: Handles | None = None
    # The fidelity gate's retry: handles an earlier answer left out, to name this time.
    must_name: Handles | None = None
    # ... and what happened that it did not say ("file store.py: how it changed"), to say.
    must_say: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SummaryResult:
    content: str
    model: str  # "deterministic" or the provider's model name
    input_tokens: int | None = None
    output_tokens: int | None = None


class SummarizerError(Exception):
    """This level failed (timeout, overload after retries, unusable output, 5xx): escalate."""


class SummarizerAuthError(SummarizerError):
    """The provider refused the credentials (401/403): write nothing, surface it, never retry."""


class Summarizer(Protocol):
    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult: ...
