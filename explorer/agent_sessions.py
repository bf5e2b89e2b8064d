"""Coding-agent sessions as people know them, for the explorer (docs/explorer.md, "Agent
sessions"): the conversation list's agent, version, project, title (the agent's own, or
the first prompt), time span and sub-agents under their parent; and, per agent compaction
of a session, what the agent's summary kept, what it dropped and what the product handed
back (`importers.AgentCompactionRepair`). Fixed query counts whatever the page holds."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Max, Min, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Substr

from compaction.models import SummaryFidelity
from conversations.models import Conversation, Message, Summary, SummaryMessage
from importers.models import AgentCompactionRepair, ImportedSummary

# The import rows' `line` of a conversation that runs under another one (its
# `parent_session`): sub-agents, sidechains, sub-tasks, and the branches and forks of it.
CHILD_LINES = ("subagent", "sidechain", "subtask", "branch", "fork")
AGENT_COMPACTION = "(agent compaction)"
_TITLE_CHARS = 120
_DROPPED_SHOWN = 12  # per kind


def agent_filters(queryset: QuerySet, *, agent: str, project: str) -> QuerySet:
    """Only `agent`'s sessions, and those in `project` (the directory or below it)."""
    if agent:
        queryset = queryset.filter(origin__agent=agent)
    if project:
        root = project.rstrip("/") or "/"
        queryset = queryset.filter(Q(origin__cwd=root) | Q(origin__cwd__startswith=root + "/"))
    return queryset


def top_level(queryset: QuerySet) -> QuerySet:
    """Sessions, not the sub-agents and sidechains that run under them."""
    return queryset.exclude(import_source__metadata__line__in=CHILD_LINES)


def with_session_facts(queryset: QuerySet) -> QuerySet:
    """Each row with its origin, its first typed prompt (for a title when the agent gave
    none) and its number of agent compactions."""
    first_prompt = (
        Message.objects.filter(conversation=OuterRef("pk"), role="user")
        .exclude(content__startswith="<")
        .exclude(content__startswith="[tool ")
        .exclude(content__startswith="Caveat:")
        .order_by("seq")
        .annotate(head=Substr("content", 1, _TITLE_CHARS))
        .values("head")[:1]
    )
    compactions = (
        Summary.objects.filter(conversation=OuterRef("pk"), model__endswith=AGENT_COMPACTION)
        .order_by()
        .values("conversation")
        .annotate(n=Count("id"))
        .values("n")
    )
    return queryset.select_related("origin", "import_source").annotate(
        first_prompt=Subquery(first_prompt), agent_compactions=Subquery(compactions)
    )


def attach_children(rows: list[Conversation], visible: QuerySet) -> None:
    """Each row's sub-agents (one query for the page), as `row.children`."""
    for row in rows:
        row.children = []
    sessions = {row.session_id: row for row in rows}
    if not sessions:
        return
    children = (
        with_session_facts(
            visible.filter(
                import_source__metadata__line__in=CHILD_LINES,
                import_source__metadata__parent_session__in=list(sessions),
            )
        )
        .select_related("owner")
        .order_by("pk")
    )
    for child in children:
        parent = sessions.get(child.import_source.metadata.get("parent_session"))
        if parent is not None:
            parent.children.append(child)


def agent_names(visible: QuerySet) -> list[str]:
    return sorted(
        a for a in visible.values_list("origin__agent", flat=True).distinct().order_by() if a
    )


@dataclass
class AgentCompactionView:
    summary: Summary
    first_seq: int | None
    last_seq: int | None
    messages: int
    trigger: str
    score: float | None
    kept: dict = field(default_factory=dict)  # kind -> [named, total]
    dropped: dict = field(default_factory=dict)  # kind -> first handles
    dropped_more: int = 0
    repair: AgentCompactionRepair | None = None


def agent_compactions(conversation: Conversation) -> list[AgentCompactionView]:
    """The session's agent compactions, oldest first: the range each replaced, what its
    summary kept and dropped of the range's handles, and what was handed back. Four
    queries."""
    summaries = list(
        Summary.objects.filter(
            conversation=conversation, model__endswith=AGENT_COMPACTION
        ).order_by("latest_at", "pk")
    )
    ids = [s.pk for s in summaries]
    if not ids:
        return []
    ranges = {
        row["summary_id"]: row
        for row in SummaryMessage.objects.filter(summary_id__in=ids)
        .values("summary_id")
        .annotate(first=Min("message__seq"), last=Max("message__seq"), n=Count("message"))
    }
    fidelity = {f.summary_id: f for f in SummaryFidelity.objects.filter(summary_id__in=ids)}
    repairs = {r.summary_id: r for r in AgentCompactionRepair.objects.filter(summary_id__in=ids)}
    sources = dict(
        ImportedSummary.objects.filter(summary_id__in=ids).values_list("summary_id", "source")
    )
    views = []
    for summary in summaries:
        span = ranges.get(summary.pk, {})
        measured = fidelity.get(summary.pk)
        dropped = (measured.dropped if measured else None) or {}
        shown = {kind: names[:_DROPPED_SHOWN] for kind, names in dropped.items()}
        views.append(
            AgentCompactionView(
                summary=summary,
                first_seq=span.get("first"),
                last_seq=span.get("last"),
                messages=span.get("n", 0),
                trigger=str((sources.get(summary.pk) or {}).get("trigger") or ""),
                score=measured.score if measured else None,
                kept=(measured.kept if measured else None) or {},
                dropped=shown,
                dropped_more=sum(len(v) for v in dropped.values())
                - sum(len(v) for v in shown.values()),
                repair=repairs.get(summary.pk),
            )
        )
    return views
