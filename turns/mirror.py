"""Mirror a turn's messages into its branch's LCM conversation.

Every user message, assistant message, tool call and tool result is appended through
`conversations.services.messages_append` with typed parts and an idempotent external id
(`turn:{id}:user`, `turn:{id}:step{i}:assistant`, `turn:{id}:step{i}:tool_results`), so
compaction, grep, describe, expand, integrity and the explorer see chat sessions like any
other conversation, and a retry or the reconciler never appends a message twice.

`messages_append` opens its own durable transaction, so mirroring runs right after the
turn's own transaction commits; a crash in between is healed by the reconciler.
"""

from __future__ import annotations

import json
import logging

from conversations.inputs import MessageInput, PartInput
from conversations.models import PartType, Role
from conversations.services import messages_append
from turns.models import FINALIZED_PHASES, Branch, ContextStrategy, ProviderStep, UserTurn

logger = logging.getLogger("lcm.turns")


def block_parts(blocks: list[dict]) -> list[PartInput]:
    parts: list[PartInput] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                parts.append(PartInput(PartType.TEXT, None, {"text_content": block["text"]}))
        elif kind == "tool_use":
            parts.append(
                PartInput(
                    PartType.TOOL,
                    None,
                    {
                        "tool_call_id": str(block.get("id", ""))[:255],
                        "tool_name": str(block.get("name", ""))[:255],
                        "tool_input": block.get("input") or {},
                        "tool_status": "called",
                    },
                )
            )
        elif kind == "tool_result":
            output = "".join(
                b.get("text", "") for b in block.get("content") or [] if b.get("type") == "text"
            )
            columns = {
                "tool_call_id": str(block.get("tool_use_id", ""))[:255],
                "tool_status": "error" if block.get("is_error") else "completed",
            }
            columns["tool_error" if block.get("is_error") else "tool_output"] = output
            parts.append(PartInput(PartType.TOOL, None, columns))
        elif kind == "reasoning":
            parts.append(
                PartInput(
                    PartType.REASONING,
                    None,
                    {"text_content": block.get("summary") or "", "metadata": {"block": block}},
                )
            )
        elif kind == "image":
            parts.append(
                PartInput(
                    PartType.FILE,
                    None,
                    {
                        "file_mime": str(block.get("media_type", ""))[:255],
                        "metadata": {"block": block},
                    },
                )
            )
        else:  # unknown provider blocks are preserved raw, never dropped
            parts.append(
                PartInput(
                    PartType.TEXT,
                    None,
                    {"text_content": "", "is_ignored": True, "metadata": {"block": block}},
                )
            )
    return [PartInput(p.part_type, i, p.columns) for i, p in enumerate(parts)]


def _text_of(blocks: list[dict]) -> str:
    return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def turn_messages(turn: UserTurn, steps: list[ProviderStep] | None = None) -> list[MessageInput]:
    """The LCM messages of a turn, in order: user, then per step its assistant message and
    (when a tool loop followed) the tool results sent back."""
    items = [
        MessageInput(
            role=Role.USER,
            content=turn.user_message.get("rendered_text") or _text_of(turn.user_message["blocks"]),
            parts=tuple(block_parts(turn.user_message["blocks"])),
            external_id=f"turn:{turn.id}:user",
            created_at=turn.created_at,
        )
    ]
    if turn.phase not in FINALIZED_PHASES:
        return items  # only a finalized answer is canonical; partial output stays on the turn
    if steps is None:
        steps = list(ProviderStep.objects.filter(turn=turn).order_by("step_index"))
    final_index = steps[-1].step_index if steps else None
    for step in steps:
        blocks = _step_blocks(step, turn, final=step.step_index == final_index)
        if blocks:
            items.append(
                MessageInput(
                    role=Role.ASSISTANT,
                    content=_text_of(blocks),
                    parts=tuple(block_parts(blocks)),
                    external_id=f"turn:{turn.id}:step{step.step_index}:assistant",
                    created_at=step.ended_at or step.started_at,
                )
            )
        results = [
            {
                "type": "tool_result",
                "tool_use_id": item.get("call_id", ""),
                "content": _output_blocks(item.get("output")),
                "is_error": bool(item.get("is_error")),
            }
            for item in step.normalized_items or []
            if item.get("kind") == "tool_output"
        ]
        if results:
            items.append(
                MessageInput(
                    role=Role.TOOL,
                    content="",
                    parts=tuple(block_parts(results)),
                    external_id=f"turn:{turn.id}:step{step.step_index}:tool_results",
                    created_at=step.ended_at or step.started_at,
                )
            )
    return items


def _step_blocks(step: ProviderStep, turn: UserTurn, *, final: bool) -> list[dict]:
    if final and turn.final_assistant_message:
        return list(turn.final_assistant_message.get("blocks") or [])
    for item in step.normalized_items or []:
        if item.get("kind") == "assistant_message":
            return list(item.get("blocks") or [])
    return []


def _output_blocks(output) -> list[dict]:
    if isinstance(output, list):
        return output
    if isinstance(output, str):
        return [{"type": "text", "text": output, "annotations": []}]
    return [{"type": "text", "text": json.dumps(output, ensure_ascii=False), "annotations": []}]


def mirror_turn(turn: UserTurn) -> int:
    """Append whatever of `turn` the branch conversation lacks; returns how many messages
    were new. Never raises: the turn already succeeded, the reconciler retries later."""
    try:
        conversation_id = turn.branch.conversation_id
        appended = messages_append(conversation_id=conversation_id, messages=turn_messages(turn))
    except Exception:
        logger.exception("mirroring turn %s into its LCM conversation failed", turn.id)
        return 0
    level = "answer" if turn.phase in FINALIZED_PHASES else "user"
    if turn.mirrored != level and turn.mirrored != "answer":
        UserTurn.objects.filter(pk=turn.pk).exclude(mirrored="answer").update(mirrored=level)
        turn.mirrored = level
    return sum(1 for a in appended if a.created)


def summaries_never_sent(conversation_id: int) -> bool:
    """Whether `conversation_id` mirrors a branch of a `state` session: that strategy sends
    the librarian's state, never the conversation's summaries, so compacting it on every
    append would spend summarizer calls on nothing the model sees (issue 46)."""
    return Branch.objects.filter(
        conversation_id=conversation_id, session__context_strategy=ContextStrategy.STATE
    ).exists()
