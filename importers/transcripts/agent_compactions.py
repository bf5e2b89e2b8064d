"""The coding agent's own compactions, in the summary DAG.

When Claude Code, Codex or OpenCode compacted its session, the summary it wrote is stored
as what it is: a leaf summary over the messages it replaced in the agent's context (the
messages since the agent's previous compaction), written through
`compaction.store.summary_create` under the conversation's compaction lock, with its
author and kind on the summary (`model`: "<agent> (agent compaction)") and in
`importers_importedsummary.source`. Expand goes from it to the originals like from any
summary.

The active context is left as it is: the messages stay in it (the agent's summary is also
a message of the conversation, where the agent put it), and this product's own compaction
works on top as usual. The summary id derives from the message that carries it, so a
re-import writes nothing twice.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from compaction import fidelity
from compaction.store import NewSummary, summary_create, summary_id_for
from compaction.summarizers import SourceItem
from conversations.models import Message, Summary, SummaryKind, SummaryLevel, SummaryMessage
from core import locks
from core.token_estimate import estimate
from importers import join
from importers.models import ImportedSummary
from importers.report import ConversationResult
from importers.transcripts.common import AgentCompaction

KIND = "agent_compaction"


def link_agent_compactions(
    conversation_id: int, compactions: list[AgentCompaction], result: ConversationResult
) -> None:
    for compaction in compactions:
        _link_one(conversation_id, compaction, result)


def _link_one(conversation_id: int, compaction: AgentCompaction, result: ConversationResult):
    summary_id = summary_id_for(
        conversation_id=conversation_id, kind=KIND, depth=0, sources=[compaction.at_external_id]
    )
    if Summary.objects.filter(pk=summary_id).exists():
        return  # linked by an earlier import
    covered = _covered_rows(conversation_id, compaction)
    if covered and _linked_already(conversation_id, max(row[1] for row in covered)):
        return  # the same compaction, linked from the other side (hook or transcript)
    if not covered or not compaction.summary.strip():
        result.problem(
            "agent_compaction_not_linked",
            f"{compaction.author}'s compaction at {compaction.at_external_id} summarises "
            "messages that are not in this file (the session began with it); kept as a "
            "message only",
        )
        return
    times = [row[2] for row in covered]
    tokens = sum(row[3] for row in covered)
    summary = NewSummary(
        id=summary_id,
        conversation_id=conversation_id,
        kind=SummaryKind.LEAF,
        depth=0,
        level=SummaryLevel.NORMAL,
        content=compaction.summary,
        token_count=estimate(compaction.summary),
        earliest_at=min(times),
        latest_at=max(times),
        descendant_count=0,
        descendant_token_count=tokens,
        source_token_count=tokens,
        model=f"{compaction.author} (agent compaction)"[:255],
        file_ids=[],
        message_ids=[row[1] for row in covered],
    )
    with transaction.atomic():
        locks.lock(locks.LockKind.COMPACTION, conversation_id)
        if Summary.objects.filter(pk=summary_id).exists():  # a concurrent import wrote it
            return
        if _linked_already(conversation_id, max(row[1] for row in covered)):
            return  # a concurrent hook (or import) linked the same compaction
        row = summary_create(summary, now=timezone.now())
        ImportedSummary.objects.create(
            summary=row,
            source={
                "kind": KIND,
                "author": compaction.author,
                "at_external_id": compaction.at_external_id,
                **compaction.metadata,
            },
        )
        _record_fidelity(row, [r[1] for r in covered])
    result.counts["summaries"] += 1
    result.counts["summary_messages"] += len(covered)


def _covered_rows(conversation_id: int, compaction: AgentCompaction) -> list[tuple]:
    """(external id, pk, created_at, token_count) of the stored messages it covers, in
    order; a record stored in a drop-in message (importers/join.py) counts as that
    message, once."""
    holders = join.messages_of(conversation_id, list(dict.fromkeys(compaction.covered)))
    rows = {
        row[1]: row
        for row in Message.objects.filter(pk__in=set(holders.values())).values_list(
            "external_id", "pk", "created_at", "token_count"
        )
    }
    ordered = [rows[holders[e]] for e in dict.fromkeys(compaction.covered) if e in holders]
    return list({row[1]: row for row in ordered}.values())


def _linked_already(conversation_id: int, last_message_id: int) -> bool:
    """Whether an agent compaction already covers that message (the last one a compaction
    replaced): the agent's PostCompact hook links its compaction from the hook input
    before the agent writes it to its transcript, the drop-in links a `/compact` it passed
    through when its answer is stored, and the transcript's import then finds it there
    (and the other way round). Two compactions of one session never cover one message."""
    linked = Summary.objects.filter(
        conversation_id=conversation_id, model__endswith="(agent compaction)"
    ).values_list("pk", flat=True)
    return SummaryMessage.objects.filter(
        summary_id__in=list(linked), message_id=last_message_id
    ).exists()


def _record_fidelity(row: Summary, message_ids: list[int]) -> None:
    """The agent's summary measured like ours (docs/compaction.md, "Fidelity"), path
    `agent`: what it keeps of the handles of the messages it replaced."""
    messages = Message.objects.filter(pk__in=message_ids).order_by("seq")
    sources = [
        SourceItem.of_message(m) for m in messages.only("seq", "role", "content", "created_at")
    ]
    fidelity.record(
        row, fidelity.measure_summary(row.content, fidelity.leaf_handles(sources), "agent")
    )
