"""An agent session seen through the drop-in and by capture (the watcher, hooks, an import
of its session file) is one conversation, stored once (importers/join.py; docs/drop-in.md,
"Seen by the watcher too").

* A session thread's conversation is named by the agent's own session id, the one the
  importers use: Claude Code's `metadata.user_id` session id, Codex's and OpenCode's
  `prompt_cache_key`. The drop-in thread of a session the watcher imported first takes
  that conversation over (the conversation has no thread yet); an import of a session the
  drop-in began extends the drop-in's conversation.
* Appends to such a conversation go through `importers.join.append`: what the other side
  stored already is joined, not stored again.

`/compact` typed by the user: the compaction request and its answer are stored like any
exchange, and the answer is linked as the agent's compaction over the messages it replaced
(`compaction_answered`); the requests after it begin with the agent's summary and continue
the same thread (`rebase`), never a fork.

Forks of a session, its side requests (title generation, quota probes) and threads without
a session keep a conversation of their own (`dropin:<id>`): no session file holds them as
they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from conversations.inputs import MessageInput
from conversations.models import Conversation
from conversations.services import AppendedMessage, messages_append
from core.ids import new_id
from dropin.requests import DropinRequest
from importers import join

SESSION_PREFIX = "session:"


def joinable(key: str) -> bool:
    """Whether a thread of this key may share its conversation with a captured session."""
    return key.startswith(SESSION_PREFIX) and ":side:" not in key


def agent_session(*, key: str, session: str | None, owner_id: int) -> str | None:
    """The agent's session id a thread's key names (None: not an agent session's key).
    Claude Code's key is `session:<id>`; the Responses wire's `session:<owner>:<id>`."""
    if not joinable(key):
        return None
    if session and key == SESSION_PREFIX + session:
        return session
    per_owner = f"{SESSION_PREFIX}{owner_id}:"
    if key.startswith(per_owner) and len(key) > len(per_owner):
        return key[len(per_owner) :]
    return None


def conversation_session_id(*, key: str, session: str | None, owner_id: int, fork: bool) -> str:
    """The session id a new thread's conversation is created (or found) under: the
    agent's own, unless that conversation already holds a drop-in thread, or the thread
    is a fork."""
    agent = None if fork else agent_session(key=key, session=session, owner_id=owner_id)
    if agent and len(agent) <= 255:
        taken = Conversation.objects.filter(
            owner_id=owner_id, session_id=agent, dropin_thread__isnull=False
        ).exists()
        if not taken:
            return agent
    return f"dropin:{new_id()}"


KEPT_WINDOW = 12  # messages before the agent's compaction its next request may repeat


def append(
    *,
    conversation_id: int,
    messages: Sequence[MessageInput],
    joined: bool,
    after_compaction: bool = False,
) -> list[AppendedMessage]:
    """Append a thread's messages: joined with a captured copy of the session when the
    thread is a session's, else plainly. `after_compaction`: the first request after the
    agent's compaction, whose repeats of the messages it kept are joined, not stored."""
    if after_compaction:
        messages = join.append_kept(
            conversation_id=conversation_id,
            messages=messages,
            kept_from=_before_compaction(conversation_id),
        )
    if not joined:
        return messages_append(conversation_id=conversation_id, messages=messages)
    return join.append(conversation_id=conversation_id, messages=messages, side=join.DROPIN)


def _before_compaction(conversation_id: int) -> list[int]:
    """The last messages the latest agent compaction covered (oldest first)."""
    from conversations.models import Message, SummaryMessage
    from importers.repair import latest_agent_compaction

    summary = latest_agent_compaction(conversation=Conversation(pk=conversation_id))
    if summary is None:
        return []
    ids = SummaryMessage.objects.filter(summary=summary).values_list("message_id", flat=True)
    last = Message.objects.filter(pk__in=list(ids)).order_by("-seq").values_list("seq", flat=True)
    end = last.first() or 0
    window = Message.objects.filter(
        conversation_id=conversation_id, seq__gt=end - KEPT_WINDOW, seq__lte=end
    )
    return list(window.order_by("seq").values_list("pk", flat=True))


# `/compact` typed by the user (Claude Code) --------------------------------------------------

# Claude Code's compaction request ends with a user message asking for a summary; the
# requests after it begin with the summary, in a message that says so.
COMPACTION_MARKS = ("CRITICAL: Respond with TEXT ONLY", "create a detailed summary of the")
CONTINUED_MARK = "This session is being continued from a previous conversation"
AUTHOR = "claude-code"


def _text(message: dict) -> str:
    from providers import blocks

    return blocks.rendered_text(message["blocks"])


def is_compaction_request(request: DropinRequest) -> bool:
    """The agent asks for a summary of its session (Claude Code's `/compact`, or its
    auto-compaction): its newest message is the summary prompt."""
    if not request.session or not request.messages:
        return False
    last = request.messages[-1]
    if last["role"] != "user":
        return False
    text = _text(last)
    return any(mark in text for mark in COMPACTION_MARKS)


def continues_compacted(request: DropinRequest) -> bool:
    """The request begins where the agent's compaction left its session: its first
    message holds the agent's summary (after Claude Code's system reminders)."""
    if not request.session or not request.messages:
        return False
    return any(
        block.get("type") == "text" and block.get("text", "").lstrip().startswith(CONTINUED_MARK)
        for block in request.messages[0]["blocks"]
    )


def compaction_prompt(message: dict) -> dict:
    """The compaction prompt of a request off the thread's line: its text blocks from the
    first that asks for the summary on (Claude Code merges the prompt into the last user
    message, whose earlier blocks the thread holds already)."""
    blocks = message["blocks"]
    first = next(
        (
            i
            for i, block in enumerate(blocks)
            if block.get("type") == "text"
            and any(mark in block.get("text", "") for mark in COMPACTION_MARKS)
        ),
        0,
    )
    return {"role": "user", "blocks": blocks[first:]}


def rebase(thread, hashes: list[str]) -> None:
    """After the agent compacted, its requests carry its summary and what followed: the
    thread's chain starts again from them (the stored messages before stay as they are;
    only the thread's pointer moves, compare-and-set on the head it had)."""
    from dropin.models import Thread

    Thread.objects.filter(pk=thread.pk, head_hash=thread.head_hash).update(
        message_count=len(hashes) - 1,
        head_hash=hashes[-1],
        root_hash=hashes[1] if len(hashes) > 1 else "",
        forward_cut=None,
    )
    thread.message_count, thread.head_hash = len(hashes) - 1, hashes[-1]


def compaction_answered(
    *, conversation_id: int, prompt_external_id: str, answer_external_id: str
) -> None:
    """The answer to the agent's compaction request, stored: linked as the agent's
    compaction (a leaf summary by claude-code over the messages since its previous one,
    up to the request's prompt; importers/transcripts/agent_compactions.py) and its repair
    drawn (importers/repair.py; handed back by the hooks when they are installed)."""
    from conversations.models import Message, SummaryMessage
    from importers.repair import agent_compaction_repair, latest_agent_compaction
    from importers.report import ConversationResult
    from importers.transcripts.agent_compactions import link_agent_compactions
    from importers.transcripts.common import AgentCompaction

    conversation = Conversation.objects.get(pk=conversation_id)
    held = join.messages_of(conversation_id, [prompt_external_id, answer_external_id])
    if prompt_external_id not in held or answer_external_id not in held:
        return
    rows = dict(Message.objects.filter(pk__in=list(held.values())).values_list("pk", "seq"))
    answer = Message.objects.get(pk=held[answer_external_id])
    text = _SUMMARY_TAGS.sub("", answer.content).strip()
    previous = latest_agent_compaction(conversation=conversation)
    after = 0
    if previous is not None:
        ids = SummaryMessage.objects.filter(summary=previous).values_list("message_id", flat=True)
        after = max(Message.objects.filter(pk__in=list(ids)).values_list("seq", flat=True))
    covered = list(
        conversation.messages.filter(
            seq__gt=after, seq__lt=rows[held[prompt_external_id]], external_id__isnull=False
        )
        .order_by("seq")
        .values_list("external_id", flat=True)
    )
    compaction = AgentCompaction(
        summary=text,
        covered=covered,
        at_external_id=f"{AUTHOR}:{answer_external_id}",
        author=AUTHOR,
        metadata={"from": "drop-in", "request": prompt_external_id},
    )
    link_agent_compactions(
        conversation_id, [compaction], ConversationResult(session_id=conversation.session_id)
    )
    summary = latest_agent_compaction(conversation=conversation)
    if summary is not None and summary.pk != getattr(previous, "pk", None):
        agent_compaction_repair(summary=summary)


_SUMMARY_TAGS = re.compile(r"</?summary>|<analysis>.*?</analysis>", re.S)
