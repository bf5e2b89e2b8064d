"""An agent's request to compact its context, answered from the product's own compaction.

Codex compacts on its own: on a custom provider it sends an ordinary request whose last user
text is its "CONTEXT CHECKPOINT COMPACTION" prompt and keeps the text it gets back as the
handoff for its next turn; with OpenAI's endpoint it ends `input` with a `compaction_trigger`
and keeps the one `compaction` item it gets back in place of its history. Either way the
product answers without calling the model: the request's history is stored (as any
request's), the stored conversation is compacted (its summaries written, the originals
kept and expandable), and the answer is its assembled context as text: the summaries with
their ids (`lcm_expand` opens one), then the newest messages, within a bound. The usage
reported is that text's size, so the agent sees a context well under its limit.

The `compaction` item's `encrypted_content` is `lcm-checkpoint:` and the text (base64):
when the agent sends it back, the Responses wire reads it as the checkpoint text, and a
Responses upstream is sent that text instead of an item it could not decrypt.
"""

from __future__ import annotations

import base64
import json
import logging

from compaction.assembly import assemble_context
from compaction.engine import compact_conversation
from conversations.models import Conversation
from core.api.errors import LcmError
from core.token_estimate import estimate
from providers import blocks as b
from providers.base import ProviderResponse, outcome, usage

logger = logging.getLogger("lcm.dropin")

PROMPT_MARK = "CONTEXT CHECKPOINT COMPACTION"
ITEM_PREFIX = "lcm-checkpoint:"
# The checkpoint's bound: the agent keeps it beside its own user messages from then on, so
# it must leave the agent well under the limit that made it compact.
CHECKPOINT_TOKENS = 2000
HEADING = (
    "Checkpoint of this session from the LCM context server (conversation {id}). Nothing was "
    "lost: every earlier message is stored; the summaries below name their ids (sum_...), and "
    "the lcm_expand tool returns the original messages of one, lcm_grep searches them all."
)


def continued_at(messages: list[dict], conversation_id: int) -> tuple[int, int] | None:
    """Where a request continues past this conversation's checkpoint: (the message, the
    block in it) of the newest checkpoint text the product gave it, which the agent keeps
    in place of the history it dropped (Codex: its kept user messages, then the checkpoint
    after its summary prefix, all one user message here); None when there is none."""
    mark = HEADING.format(id=conversation_id).split(")", 1)[0] + ")"
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message["role"] != "user":
            continue
        for index, block in enumerate(message["blocks"]):
            if block.get("type") == "text" and mark in block.get("text", ""):
                return position, index
    return None


def encode_item(text: str) -> str:
    return ITEM_PREFIX + base64.b64encode(text.encode()).decode()


def decode_item(content) -> str | None:
    """The checkpoint text of a `compaction` item the product made, else None."""
    if not isinstance(content, str) or not content.startswith(ITEM_PREFIX):
        return None
    try:
        return base64.b64decode(content[len(ITEM_PREFIX) :], validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def checkpoint_text(conversation_id: int, *, with_user_messages: bool) -> str:
    """Compact the conversation now (a run already holding it is waited for by nobody: its
    summaries are used as they are), then its context within CHECKPOINT_TOKENS as text.
    Codex keeps its user messages beside a checkpoint prompt's answer (so they are left
    out), not beside a `compaction` item (which stands for everything)."""
    try:
        compact_conversation(conversation_id=conversation_id, mode="full", reason="manual")
    except LcmError as error:  # another run holds it: what is stored already serves
        logger.info("checkpoint compaction skipped", extra={"reason": str(error)})
    assembled = assemble_context(
        conversation=Conversation(pk=conversation_id),
        token_budget=CHECKPOINT_TOKENS,
        fmt="anthropic",
        describe_dropped=False,
        split_summaries=True,
    )
    parts = [HEADING.format(id=conversation_id)]
    summaries = list(assembled.output.get("summaries") or [])
    if summaries:
        parts.append("Summaries of the earlier work (oldest first):\n" + "\n".join(summaries))
    # The agent keeps its user messages itself: the work in between is what it drops.
    recent = [
        _line(m)
        for m in assembled.output.get("messages") or []
        if with_user_messages or m.get("role") != "user" or _has_results(m)
    ]
    if any(recent):
        parts.append("The newest work:\n" + "\n".join(line for line in recent if line))
    return "\n\n".join(parts)


def _has_results(message: dict) -> bool:
    """A user turn made of tool results (what the commands printed), not the user's words."""
    content = message.get("content") or []
    return message.get("role") == "user" and any(
        isinstance(block, dict) and block.get("type") == "tool_result" for block in content
    )


def _line(message: dict) -> str:
    pieces = []
    for block in message.get("content") or []:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            pieces.append(block["text"])
        elif kind == "tool_use":
            pieces.append(f"[called {block.get('name')} {json.dumps(block.get('input'))[:500]}]")
        elif kind == "tool_result":
            content = block.get("content")
            text = content if isinstance(content, str) else b.rendered_text(content or [])
            pieces.append(f"[result: {text[:500]}]")
    return f"{message.get('role')}: " + " ".join(pieces) if pieces else ""


def answer(text: str, *, model: str, trigger: bool) -> ProviderResponse:
    """The checkpoint as a model's answer: text, or the one `compaction` item."""
    if trigger:
        item = {"type": "compaction", "encrypted_content": encode_item(text)}
        blocks = [b.unknown("openai", item)]
    else:
        blocks = [b.text(text)]
    tokens = estimate(text)
    return ProviderResponse(
        raw_request={"checkpoint": True},
        raw_response=None,
        blocks=blocks,
        items=[],
        outcome=outcome("completed", "completed"),
        usage=usage(tokens, tokens),
        model=model,
    )
