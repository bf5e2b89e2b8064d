"""Step "summaries": every summary over a redacted message is regenerated from its
redacted sources, and so is every summary above it in the DAG (and any summary of the
scope whose text the matcher still finds), lowest depth first. Each keeps its id, its
place in the context and its lineage; only its content, token count and model change.

The summarizer is the configured one (compaction.engine.summarizer_from_settings), which
is the deterministic one when no model is configured; if a model call fails, the
deterministic summarizer writes it. The context items that hold a regenerated summary get
a new `created_at`: the assembler's rendered-summary cache (compaction.assembly) is keyed
by it, so every process renders the new text on its next read.
"""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compaction.engine import summarizer_from_settings
from compaction.summarizers import (
    DeterministicSummarizer,
    SourceItem,
    SummarizerError,
    SummaryRequest,
)
from conversations.archive_port import hydrate_messages
from conversations.models import ContextItem, Message, Summary, SummaryMessage, SummaryParent
from core.token_estimate import estimate
from security.redaction.context import JobContext
from security.redaction.permit import redact_permit


def affected(ctx: JobContext) -> list[Summary]:
    """The summaries to regenerate, lowest depth first."""
    conversations = ctx.row.conversation_ids
    ids = set(
        SummaryMessage.objects.filter(message_id__in=ctx.row.message_ids or [0]).values_list(
            "summary_id", flat=True
        )
    )
    for pk, content in (
        Summary.objects.filter(conversation_id__in=conversations)
        .values_list("pk", "content")
        .iterator()
    ):
        if ctx.matcher.search(content):
            ids.add(pk)
    frontier = set(ids)
    while frontier:
        above = set(
            SummaryParent.objects.filter(parent_summary_id__in=frontier).values_list(
                "summary_id", flat=True
            )
        )
        frontier = above - ids
        ids |= above
    return list(Summary.objects.filter(pk__in=ids).order_by("depth", "earliest_at", "pk"))


def _sources(summary: Summary) -> list[SourceItem]:
    if summary.depth == 0:
        ids = list(
            SummaryMessage.objects.filter(summary=summary)
            .order_by("ordinal")
            .values_list("message_id", flat=True)
        )
        by_id = {m.pk: m for m in hydrate_messages(Message.objects.filter(pk__in=ids))}
        return [SourceItem.of_message(by_id[i]) for i in ids]
    ids = list(
        SummaryParent.objects.filter(summary=summary)
        .order_by("ordinal")
        .values_list("parent_summary_id", flat=True)
    )
    by_id = {s.pk: s for s in Summary.objects.filter(pk__in=ids)}
    return [
        SourceItem(
            ref=i,
            kind="summary",
            content=by_id[i].content,
            created_at=by_id[i].earliest_at,
            latest_at=by_id[i].latest_at,
        )
        for i in ids
    ]


def _summarize(summary: Summary, sources: list[SourceItem]) -> tuple[str, str]:
    target = (
        settings.LCM_LEAF_TARGET_TOKENS
        if summary.depth == 0
        else settings.LCM_CONDENSED_TARGET_TOKENS
    )
    request = SummaryRequest(
        sources=sources,
        depth=summary.depth,
        target_tokens=target,
        level="normal",
        conversation_id=summary.conversation_id,
    )
    try:
        result = summarizer_from_settings().summarize(request)
    except SummarizerError:
        result = DeterministicSummarizer().summarize(request)
    return result.content, result.model


def run(ctx: JobContext) -> dict:
    regenerated: list[str] = []
    depths: dict[str, int] = {}
    with transaction.atomic(), redact_permit():
        for summary in affected(ctx):
            content, model = _summarize(summary, _sources(summary))
            content, _ = ctx.matcher.sub(content)  # a model could still echo it
            tokens = estimate(content)
            Summary.objects.filter(pk=summary.pk).update(
                content=content, token_count=tokens, model=model[:255]
            )
            ContextItem.objects.filter(summary_id=summary.pk).update(
                token_count=tokens, created_at=timezone.now()
            )
            regenerated.append(summary.pk)
            key = f"depth_{summary.depth}"
            depths[key] = depths.get(key, 0) + 1
    return {"summaries": len(regenerated), **depths, "ids": regenerated}
