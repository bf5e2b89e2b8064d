"""Reads behind the explorer pages. Every function takes a conversation the caller already
got through `conversation_get_for_user`, and costs a fixed number of queries whatever the
size of the conversation (the DAG walks are one recursive CTE each)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.conf import settings
from django.db import connection
from django.db.models import Count, IntegerField, Max, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from compaction.assembly import assemble_context
from compaction.evaluation import low_water_tokens
from compaction.models import SummaryFidelity
from compaction.summarizers.sections import Section, split_sections
from conversations.archive_port import hydrate_messages
from conversations.models import (
    ContextItem,
    Conversation,
    ItemType,
    Message,
    Role,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from conversations.selectors import conversations_visible_to
from explorer import agent_sessions
from largefiles.models import LargeFile
from largefiles.store import file_storage
from retrieval.selectors import covering_summaries, summary_subtree

TIMELINE_PAGE = 50
CONTEXT_PAGE = 50
LIST_PAGE = 50


# --- conversation list -------------------------------------------------------------------


def _page_of(queryset: QuerySet, page: int) -> tuple[list, bool]:
    """Page `page` (from 1) of LIST_PAGE rows, and whether a next page exists. No
    COUNT(*) over the table: one extra row answers that."""
    offset = (page - 1) * LIST_PAGE
    rows = list(queryset[offset : offset + LIST_PAGE + 1])
    return rows[:LIST_PAGE], len(rows) > LIST_PAGE


def conversation_list_page(
    *, user, query: str = "", page: int = 1, agent: str = "", project: str = ""
) -> tuple[list, bool]:
    """One page of the conversations the user may see, newest activity first: agent
    sessions as people know them (explorer.agent_sessions), their sub-agents under them,
    filtered by agent and project.

    Returns (rows, has_more). Three queries: the page with its context tokens and session
    facts, the page's sub-agents, then summaries by depth for just those conversations.
    """
    visible = conversations_visible_to(user)
    queryset = agent_sessions.agent_filters(visible, agent=agent, project=project)
    queryset = agent_sessions.with_session_facts(agent_sessions.top_level(queryset))
    queryset = queryset.select_related("owner")
    if query:
        queryset = queryset.filter(Q(session_id__icontains=query) | Q(title__icontains=query))
    context_tokens = (
        ContextItem.objects.filter(conversation=OuterRef("pk"))
        .order_by()
        .values("conversation")
        .annotate(total=Sum("token_count"))
        .values("total")
    )
    queryset = queryset.annotate(
        context_tokens=Coalesce(Subquery(context_tokens, output_field=IntegerField()), 0)
    ).order_by("-updated_at", "-pk")
    rows, has_more = _page_of(queryset, page)
    agent_sessions.attach_children(rows, visible)
    every = [*rows, *(child for row in rows for child in row.children)]
    depths: dict[int, dict[int, int]] = defaultdict(dict)
    if rows:
        for conversation_id, depth, n in (
            Summary.objects.filter(conversation_id__in=[c.pk for c in every])
            .order_by()
            .values_list("conversation_id", "depth")
            .annotate(n=Count("id"))
        ):
            depths[conversation_id][depth] = n
    for conversation in every:
        conversation.summaries_by_depth = sorted(depths[conversation.pk].items())
    return rows, has_more


def agent_choices(*, user) -> list[str]:
    """The agents of the user's sessions, for the list's filter."""
    return agent_sessions.agent_names(conversations_visible_to(user))


def agent_compactions(conversation: Conversation) -> list[agent_sessions.AgentCompactionView]:
    return agent_sessions.agent_compactions(conversation)


# --- context bar and context list --------------------------------------------------------


@dataclass(frozen=True)
class ContextBar:
    budget: int
    system_tokens: int
    summary_tokens: int
    fresh_tail_tokens: int
    older_message_tokens: int
    dropped_tokens: int
    dropped_count: int
    first_included_ordinal: int | None
    summary_count: int
    message_count: int
    fresh_tail_count: int
    # Prompt caching (docs/cost.md): the context only grows at its end until compaction
    # runs at `compaction_at` tokens, so all of it is the next request's stable prefix;
    # when items are dropped for the budget, the start slides every call (no stable prefix).
    compaction_at: int = 0
    low_water: int = 0

    @property
    def stable_tokens(self) -> int:
        """Tokens the next request sends again unchanged (0 while the start slides)."""
        return 0 if self.dropped_count else self.total

    @property
    def room_tokens(self) -> int:
        """Tokens the context can still grow before compaction rewrites the prefix."""
        return max(0, self.compaction_at - self.total)

    @property
    def total(self) -> int:
        """Tokens the assembler sends (dropped items excluded)."""
        return (
            self.system_tokens
            + self.summary_tokens
            + self.fresh_tail_tokens
            + self.older_message_tokens
        )

    def percent(self, tokens: int) -> float:
        """Share of the bar: the bar is the budget plus whatever was dropped."""
        scale = max(self.budget + self.dropped_tokens, 1)
        return round(100.0 * tokens / scale, 2)

    @property
    def segments(self) -> list[dict]:
        """Bar segments in assembly order with their x offset and width in percent."""
        parts = [
            ("system", "system", self.system_tokens),
            ("summaries", "summaries", self.summary_tokens),
            ("older", "older raw messages", self.older_message_tokens),
            ("tail", "fresh tail", self.fresh_tail_tokens),
            ("dropped", "dropped (does not fit)", self.dropped_tokens),
        ]
        out, x = [], 0.0
        for key, label, tokens in parts:
            if key == "dropped":
                x = self.budget_x  # beyond the budget line
            width = self.percent(tokens)
            out.append({"key": key, "label": label, "tokens": tokens, "x": x, "width": width})
            x = round(x + width, 2)
        return out

    @property
    def budget_x(self) -> float:
        return self.percent(self.budget)


def context_bar(*, conversation: Conversation) -> ContextBar:
    """The active context exactly as the assembler would send it, by kind.

    `assemble_context` decides what is included and what is dropped (and measures each
    summary as rendered); the fresh tail is the same protected stretch compaction uses.
    System-role messages count as "system" (the explorer sends no system prompt).
    """
    assembled = assemble_context(conversation=conversation, fmt="neutral")
    included = assembled.items
    tail_start = len(included) - assembled.tail_items
    system = summaries = tail = older = 0
    tail_count = summary_count = message_count = 0
    for index, item in enumerate(included):
        if item["type"] == "summary":
            summaries += item["tokens"]
            summary_count += 1
            continue
        message_count += 1
        if item["role"] == Role.SYSTEM:
            system += item["tokens"]
        elif index >= tail_start:
            tail += item["tokens"]
            tail_count += 1
        else:
            older += item["tokens"]
    return ContextBar(
        budget=assembled.token_budget,
        system_tokens=system,
        summary_tokens=summaries,
        fresh_tail_tokens=tail,
        older_message_tokens=older,
        dropped_tokens=sum(item["tokens"] for item in assembled.dropped),
        dropped_count=len(assembled.dropped),
        first_included_ordinal=included[0]["ordinal"] if included else None,
        summary_count=summary_count,
        message_count=message_count,
        fresh_tail_count=tail_count,
        compaction_at=int(assembled.token_budget * settings.LCM_CONTEXT_THRESHOLD),
        low_water=low_water_tokens(assembled.token_budget),
    )


def context_items_page(*, conversation: Conversation, after: int = 0) -> tuple[list, bool]:
    """Context items in assembly order after ordinal `after`, with their message or summary."""
    rows = list(
        ContextItem.objects.filter(conversation=conversation, ordinal__gt=after)
        .select_related("message", "summary")
        .order_by("ordinal")[: CONTEXT_PAGE + 1]
    )
    return rows[:CONTEXT_PAGE], len(rows) > CONTEXT_PAGE


# --- timeline ----------------------------------------------------------------------------


@dataclass
class TimelinePage:
    messages: list[Message]
    first_seq: int
    last_seq: int
    previous_from: int | None
    next_from: int | None
    latest_from: int


def timeline_part_ordinals(message_ids: Sequence[int]) -> dict[int, list[int]]:
    """The timeline's reader, for the integrity check `part_reader_disorder`: the pages
    that hold these messages, as the explorer reads them."""
    found: dict[int, list[int]] = {}
    wanted = set(message_ids)
    rows = Message.objects.filter(pk__in=wanted).values_list("conversation_id", "seq")
    by_conversation: dict[int, list[int]] = {}
    for conversation_id, seq in rows:
        by_conversation.setdefault(conversation_id, []).append(seq)
    for conversation in Conversation.objects.filter(pk__in=by_conversation):
        seqs = sorted(by_conversation[conversation.pk])
        while seqs:
            page = timeline_page(conversation=conversation, from_seq=seqs[0])
            for message in page.messages:
                if message.pk in wanted:
                    found[message.pk] = [p.ordinal for p in message.parts.all()]
            seqs = [seq for seq in seqs if seq > page.last_seq]
    return found


def timeline_page(*, conversation: Conversation, from_seq: int | None) -> TimelinePage:
    """A window of TIMELINE_PAGE messages by seq (default: the newest), parts prefetched.

    Two queries whatever the conversation size: seq is gap-free (1..last_seq), so the
    window is a range scan on the unique (conversation, seq) index.
    """
    last = conversation.last_seq
    latest_from = max(1, last - TIMELINE_PAGE + 1)
    start = latest_from if from_seq is None else min(max(1, from_seq), latest_from)
    end = start + TIMELINE_PAGE - 1
    messages = hydrate_messages(  # archived content read back, marked from_archive
        Message.objects.filter(conversation=conversation, seq__range=(start, end))
        .prefetch_related("parts")
        .order_by("seq")
    )
    return TimelinePage(
        messages=messages,
        first_seq=start,
        last_seq=min(end, last),
        previous_from=max(1, start - TIMELINE_PAGE) if start > 1 else None,
        next_from=end + 1 if end < last else None,
        latest_from=latest_from,
    )


def page_start_for_seq(seq: int) -> int:
    """The `from` of the timeline window that shows message `seq` near its top."""
    return max(1, seq - 5)


# --- the summary DAG ---------------------------------------------------------------------

# Everything above a set of messages: the leaves that hold them, then every summary built
# on those, transitively. One statement; UNION (not UNION ALL) stops on shared ancestors.
_ANCESTORS_OF_MESSAGES_SQL = """
WITH RECURSIVE up(summary_id) AS (
    SELECT sm.summary_id FROM conversations_summarymessage sm
    WHERE sm.conversation_id = %s AND sm.message_id IN ({placeholders})
    UNION
    SELECT sp.summary_id FROM conversations_summaryparent sp
    JOIN up ON sp.parent_summary_id = up.summary_id
)
SELECT summary_id FROM up
"""


def _placeholders(values: list) -> str:
    return ", ".join(["%s"] * len(values))


def summaries_above_messages(*, conversation: Conversation, message_ids: list[int]) -> set[str]:
    """The lineage path(s) from these messages up to the top of the DAG: one query."""
    if not message_ids:
        return set()
    sql = _ANCESTORS_OF_MESSAGES_SQL.format(placeholders=_placeholders(message_ids))
    with connection.cursor() as cursor:
        cursor.execute(sql, [conversation.pk, *message_ids])
        return {row[0] for row in cursor.fetchall()}


def message_lineage(*, conversation: Conversation, seq: int) -> tuple[list[str], str | None]:
    """For message `seq`: every summary above it (sorted ids) and the context summary that
    covers it now (None when it is itself in the context, or has no such message)."""
    message_id = (
        Message.objects.filter(conversation=conversation, seq=seq)
        .values_list("id", flat=True)
        .first()
    )
    if message_id is None:
        return [], None
    path = sorted(summaries_above_messages(conversation=conversation, message_ids=[message_id]))
    covering = covering_summaries(conversation_id=conversation.pk, message_ids=[message_id])
    return path, covering.get(message_id)


@dataclass
class DagNode:
    id: str
    kind: str
    depth: int
    level: str
    token_count: int
    in_context: bool
    first_seq: int | None = None
    last_seq: int | None = None
    message_count: int = 0
    fidelity: float | None = None  # share of its sources' handles it names (None: not measured)

    def as_json(self) -> dict:
        return {
            "id": self.id,
            "kind": self.kind,
            "depth": self.depth,
            "level": self.level,
            "tokens": self.token_count,
            "inContext": self.in_context,
            "firstSeq": self.first_seq,
            "lastSeq": self.last_seq,
            "messages": self.message_count,
            "fidelity": self.fidelity,
        }


@dataclass
class Dag:
    nodes: list[DagNode] = field(default_factory=list)
    edges: list[tuple[str, str]] = field(default_factory=list)  # (source, built-on)

    def as_json(self) -> dict:
        return {
            "nodes": [n.as_json() for n in self.nodes],
            "edges": [{"source": s, "target": t} for s, t in self.edges],
        }


def conversation_dag(*, conversation: Conversation) -> Dag:
    """Every summary of the conversation with its edges and message range: four queries.

    A leaf's range comes from its message edges; a condensed summary's range is the union
    of its sources', folded here in memory from the edge list (sources are one depth
    below, so walking by depth visits sources first).
    """
    summaries = list(
        Summary.objects.filter(conversation=conversation)
        .order_by("depth", "earliest_at", "id")
        .values_list("id", "kind", "depth", "level", "token_count", "fidelity__score")
    )
    ranges = {
        row["summary_id"]: row
        for row in SummaryMessage.objects.filter(conversation=conversation)
        .order_by()
        .values("summary_id")
        .annotate(first=Min("message__seq"), last=Max("message__seq"), n=Count("id"))
    }
    edges = list(
        SummaryParent.objects.filter(conversation=conversation)
        .order_by("summary_id", "ordinal")
        .values_list("parent_summary_id", "summary_id")
    )
    in_context = set(
        ContextItem.objects.filter(
            conversation=conversation, item_type=ItemType.SUMMARY
        ).values_list("summary_id", flat=True)
    )
    nodes: dict[str, DagNode] = {}
    for sid, kind, depth, level, tokens, fidelity in summaries:
        node = DagNode(sid, kind, depth, level, tokens, sid in in_context, fidelity=fidelity)
        if sid in ranges:
            node.first_seq = ranges[sid]["first"]
            node.last_seq = ranges[sid]["last"]
            node.message_count = ranges[sid]["n"]
        nodes[sid] = node
    sources_of: dict[str, list[str]] = defaultdict(list)
    for source, built_on in edges:
        sources_of[built_on].append(source)
    for node in nodes.values():  # ordered by depth: sources are folded before users
        for source_id in sources_of.get(node.id, ()):
            source = nodes.get(source_id)
            if source is None or source.first_seq is None:
                continue
            node.first_seq = min(filter(None, [node.first_seq, source.first_seq]))
            node.last_seq = max(filter(None, [node.last_seq, source.last_seq]))
            node.message_count += source.message_count
    return Dag(nodes=list(nodes.values()), edges=edges)


@dataclass
class SummaryDetail:
    summary: Summary
    in_context: bool
    sources: list[Summary]
    built_on: list[Summary]
    first_seq: int | None
    last_seq: int | None
    message_count: int
    fidelity: SummaryFidelity | None = None
    dropped: list[DroppedHandle] = field(default_factory=list)
    # What happened, as the summary's sections say it (compaction/summarizers/sections.py)
    account: list[Section] = field(default_factory=list)


@dataclass
class DroppedHandle:
    kind: str
    name: str
    search_query: str  # the explorer's search form, an exact (regex) match in the messages


def dropped_handles(fidelity: SummaryFidelity | None) -> list[DroppedHandle]:
    """The handles a summary does not name, each with the search that finds where it occurs
    in the conversation's messages."""
    if fidelity is None:
        return []
    return [
        DroppedHandle(
            kind,
            name,
            urlencode({"q": re.escape(name), "mode": "regex", "scope": "messages"}),
        )
        for kind, names in fidelity.dropped.items()
        for name in names
    ]


def summary_detail(*, conversation: Conversation, summary_id: str) -> SummaryDetail | None:
    summary = (
        Summary.objects.filter(conversation=conversation, pk=summary_id)
        .select_related("fidelity")
        .first()
    )
    if summary is None:
        return None
    fidelity = summary.fidelity if _has_fidelity(summary) else None
    sources = list(
        Summary.objects.filter(child_links__summary=summary).order_by("child_links__ordinal")
    )
    built_on = list(Summary.objects.filter(parent_links__parent_summary=summary).order_by("id"))
    below = {node.id for node in summary_subtree(summary_id=summary.pk)}
    span = SummaryMessage.objects.filter(summary_id__in=below).aggregate(
        first=Min("message__seq"), last=Max("message__seq"), n=Count("id")
    )
    in_context = ContextItem.objects.filter(conversation=conversation, summary=summary).exists()
    return SummaryDetail(
        summary=summary,
        in_context=in_context,
        sources=sources,
        built_on=built_on,
        first_seq=span["first"],
        last_seq=span["last"],
        message_count=span["n"],
        fidelity=fidelity,
        dropped=dropped_handles(fidelity),
        account=split_sections(summary.content)[0],
    )


def _has_fidelity(summary: Summary) -> bool:
    try:
        summary.fidelity  # noqa: B018 (loaded by select_related; raises when there is none)
    except SummaryFidelity.DoesNotExist:
        return False
    return True


# --- large files -------------------------------------------------------------------------


def files_visible_to(user) -> QuerySet[LargeFile]:
    return LargeFile.objects.filter(conversation__in=conversations_visible_to(user))


def file_list_page(*, user, page: int = 1) -> tuple[list[LargeFile], bool]:
    """One page of the large files the user may see, newest first: (rows, has_more)."""
    queryset = files_visible_to(user).select_related("conversation")
    return _page_of(queryset.order_by("-created_at", "-pk"), page)


def file_get_for_user(*, user, file_id: str) -> LargeFile | None:
    """A file is visible exactly when its conversation is (the same checkpoint)."""
    return files_visible_to(user).select_related("conversation").filter(pk=file_id).first()


def file_preview(*, large_file: LargeFile) -> tuple[str, bool]:
    """The first LCM_FILE_PREVIEW_BYTES of the stored content, decoded leniently."""
    limit = settings.LCM_FILE_PREVIEW_BYTES
    try:
        with file_storage().open(large_file.storage_key, "rb") as handle:
            data = handle.read(limit + 1)
    except (FileNotFoundError, OSError):
        return "", False
    return data[:limit].decode("utf-8", errors="replace"), len(data) > limit
