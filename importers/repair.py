"""Repair after a coding agent's own compaction, and the hand-off to a new session
(docs/capture.md, "Repair after the agent's compaction").

    repair = agent_compaction_repair(summary=row)          # written once per compaction
    repair = session_repair(owner=user, session_id="...")  # the session's latest one
    text = session_handoff(owner=user, project="/src/api") # for a new session

The agent's compaction is an agent-compaction summary over the messages it replaced
(agent_compactions.py, written by the importers). Its addendum
(`compaction.summarizers.addendum`) says what the agent's summary dropped that the
continuing work needs; it is stored beside the summary (`AgentCompactionRepair`) with what
the summary kept and what the two keep together, so the explorer can show it and a second
hook for the same compaction hands back the same text.
"""

from __future__ import annotations

import re
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from compaction.summarizers import SourceItem
from compaction.summarizers.addendum import Addendum, draw_addendum
from conversations.models import Conversation, Message, Summary, SummaryMessage
from core.token_estimate import estimate
from importers.models import AgentCompactionRepair

AGENT_COMPACTION = "(agent compaction)"
HANDOFF_MESSAGES = 400  # the newest messages a hand-off reads


def repair_header(summary: Summary, first_seq: int, last_seq: int) -> str:
    return (
        f"[lcm] Your compaction summary left out what follows (the {last_seq - first_seq + 1} "
        f"messages it replaced, msg:{first_seq}..msg:{last_seq} of conversation "
        f"{summary.conversation_id}, are kept whole as summary {summary.pk}: "
        f"`lcm_expand` summary_id={summary.pk} include_messages=true brings back the exact "
        f"originals, `lcm_describe` id={summary.pk} says what it covers; msg:N is a "
        "message's number). Each line says what happened:"
    )


def _budget() -> int:
    return int(getattr(settings, "LCM_REPAIR_TOKEN_BUDGET", 1_500))


def replaced_messages(summary: Summary) -> list[Message]:
    ids = SummaryMessage.objects.filter(summary=summary).values_list("message_id", flat=True)
    return list(
        Message.objects.filter(pk__in=list(ids))
        .only("seq", "role", "content", "created_at")
        .order_by("seq")
    )


def draw_repair(summary: Summary, budget: int) -> Addendum:
    messages = replaced_messages(summary)
    header = repair_header(summary, messages[0].seq, messages[-1].seq) if messages else ""
    sources = [SourceItem.of_message(m) for m in messages]
    return draw_addendum(sources, summary.content, budget=budget, estimator=estimate, header=header)


def agent_compaction_repair(
    *, summary: Summary, budget: int | None = None
) -> AgentCompactionRepair:
    """The stored repair of an agent compaction, drawn and written the first time it is
    asked for (a concurrent first call writes it once: the other reads it)."""
    found = AgentCompactionRepair.objects.filter(summary=summary).first()
    if found is not None:
        return found
    budget = _budget() if budget is None else budget
    addendum = draw_repair(summary, budget)  # no transaction open while drawing
    row = AgentCompactionRepair(
        summary=summary,
        text=addendum.text,
        tokens=addendum.tokens,
        budget=budget,
        items=addendum.as_dict()["items"],
        measured={k: v for k, v in addendum.as_dict().items() if k not in ("items", "budget")},
        path="deterministic",
    )
    try:
        with transaction.atomic():
            row.save(force_insert=True)
    except IntegrityError:
        return AgentCompactionRepair.objects.get(summary=summary)
    return row


_TAGS = re.compile(r"</?summary>|<analysis>.*?</analysis>", re.S)


def link_hook_compaction(
    *, owner, session_id: str, summary: str, author: str, key: str, trigger: str = ""
) -> bool:
    """Link the agent's compaction from its hook (Claude Code's PostCompact gives the
    summary; the agent writes it to its transcript only later): an agent-compaction summary
    over the messages since its previous one, unless one already ends there. True when the
    session now has it."""
    from importers.report import ConversationResult
    from importers.transcripts.agent_compactions import link_agent_compactions
    from importers.transcripts.common import AgentCompaction

    conversation = Conversation.objects.filter(owner=owner, session_id=session_id).first()
    text = _TAGS.sub("", summary).strip()
    if conversation is None or not text:
        return False
    after = last_compacted_seq(conversation=conversation)
    covered = list(
        conversation.messages.filter(seq__gt=after, external_id__isnull=False)
        .order_by("seq")
        .values_list("external_id", flat=True)
    )
    compaction = AgentCompaction(
        summary=text,
        covered=covered,
        at_external_id=f"{author}:hook:{key}",
        author=author,
        metadata={"from": "PostCompact hook", **({"trigger": trigger} if trigger else {})},
    )
    link_agent_compactions(conversation.pk, [compaction], ConversationResult(session_id))
    return latest_agent_compaction(conversation=conversation) is not None


def latest_agent_compaction(*, conversation: Conversation) -> Summary | None:
    return (
        Summary.objects.filter(conversation=conversation, model__endswith=AGENT_COMPACTION)
        .order_by("-latest_at", "-pk")
        .first()
    )


def last_compacted_seq(*, conversation: Conversation) -> int:
    """The seq of the last message the latest agent compaction covered (0 without one):
    the next agent compaction covers what comes after it."""
    previous = latest_agent_compaction(conversation=conversation)
    if previous is None:
        return 0
    ids = SummaryMessage.objects.filter(summary=previous).values_list("message_id", flat=True)
    return (
        Message.objects.filter(pk__in=list(ids))
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
        or 0
    )


def session_repair(*, owner, session_id: str) -> AgentCompactionRepair | None:
    """The repair of the latest agent compaction of the user's session `session_id`
    (the agent's own session id), or None when it has none."""
    conversation = Conversation.objects.filter(owner=owner, session_id=session_id).first()
    if conversation is None:
        return None
    summary = latest_agent_compaction(conversation=conversation)
    return agent_compaction_repair(summary=summary) if summary is not None else None


def deliver_once(repair: AgentCompactionRepair, event: str) -> bool:
    """Mark the repair as handed to the agent through `event`; False when it had been
    already (two hooks at once: one of them wins)."""
    with transaction.atomic():
        row = AgentCompactionRepair.objects.select_for_update().get(pk=repair.pk)
        if row.deliveries:
            return False
        row.deliveries = [{"event": event, "at": timezone.now().isoformat()}]
        row.save(update_fields=["deliveries"])
    return True


def recent_session(
    *, owner, project: str = "", agent: str = "", exclude_session: str = "", hours: float = 0
) -> Conversation | None:
    """The user's most recent agent session (main line), in `project` (the directory the
    agent ran in) and by `agent` when given, ended within `hours` when given."""
    found = Conversation.objects.filter(owner=owner, origin__isnull=False).exclude(
        session_id=exclude_session
    )
    found = found.exclude(session_id__contains=":")  # sub-agents and branches
    if project:
        found = found.filter(origin__cwd=project.rstrip("/") or "/")
    if agent:
        found = found.filter(origin__agent=agent)
    if hours:
        found = found.filter(origin__ended_at__gte=timezone.now() - timedelta(hours=hours))
    return found.select_related("origin").order_by("-origin__ended_at", "-pk").first()


def handoff_header(conversation: Conversation, first_seq: int, last_seq: int) -> str:
    origin = conversation.origin
    when = origin.ended_at.strftime("%Y-%m-%d %H:%M UTC") if origin.ended_at else "?"
    title = f' "{conversation.title}"' if conversation.title else ""
    return (
        f"[lcm] Hand-off from the {origin.agent or 'agent'} session{title} in "
        f"{origin.cwd or '?'} (last active {when}; conversation {conversation.pk}, session "
        f"{conversation.session_id}). What happened in its last messages "
        f"(msg:{first_seq}..msg:{last_seq}); `lcm_grep` with conversation_id="
        f"{conversation.pk} finds more, msg:N is a message's number. Each line says what "
        "happened:"
    )


def session_handoff(*, conversation: Conversation, budget: int | None = None) -> Addendum:
    """What a new session needs to continue `conversation`: the statements of its newest
    `HANDOFF_MESSAGES` messages within the budget. A new session holds none of it, so
    nothing is counted as known (the summary compared against is empty)."""
    budget = _budget() if budget is None else budget
    newest = list(
        conversation.messages.only("seq", "role", "content", "created_at").order_by("-seq")[
            :HANDOFF_MESSAGES
        ]
    )
    newest.reverse()
    sources = [SourceItem.of_message(m) for m in newest]
    header = handoff_header(conversation, newest[0].seq, newest[-1].seq) if newest else ""
    return draw_addendum(sources, "", budget=budget, estimator=estimate, header=header)
