"""Secrets at ingest: the policy that applies to a conversation, and messages masked (or
flagged) by it before anything is stored.

Every path in runs through here: `messages_append` (the REST API, the drop-in wires, the
transcript importers and the session watcher, the turn mirror), the lossless-claw importer
(its own bulk writer) and the turn engine (a turn's user message and tool results, before
its own tables store them). The detector is `core.secret_scan`, the one the outbound
redaction hook uses.

Policy (docs/security.md, "Secrets at ingest"): the conversation's own, else its owner's,
else the server's `LCM_SECRET_POLICY`; `mask` (the default) replaces each secret by
`[secret:<kind>]`, `flag` stores the message as sent and records a finding for review,
`off` does nothing. Findings (kind and place, never the secret) are recorded for masked and
flagged secrets alike, in the append's own transaction.

The scan runs before the policy is read: a batch with no secret costs no query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings

from conversations.inputs import MessageInput, PartInput
from conversations.models import Conversation, SecretAction, SecretFinding, SecretPolicy
from core.secret_scan import find_secrets, mask

# Part columns that carry text a secret can hide in (JSON columns are walked).
SCANNED_PART_COLUMNS = (
    "text_content", "tool_input", "tool_output", "tool_error", "tool_title", "file_name",
    "file_url", "subtask_prompt", "subtask_desc", "step_reason", "metadata",
)  # fmt: skip


@dataclass(frozen=True)
class FoundSecret:
    index: int  # the message's place in its batch
    location: str  # "content", "parts[1].tool_output", "parts[0].tool_input.env.TOKEN"
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Guarded:
    messages: list[MessageInput]  # masked under `mask`, else as sent
    found: list[FoundSecret]
    action: str  # SecretAction, or "" when nothing was found or the policy is off


def server_policy() -> str:
    return settings.LCM_SECRET_POLICY


def policy_for(conversation_id: int) -> str:
    """The conversation's effective policy: its own, its owner's, the server's."""
    row = (
        Conversation.objects.filter(pk=conversation_id)
        .values_list("secret_policy", "owner__secret_policy__policy")
        .first()
    )
    if row is None:
        return server_policy()
    return row[0] or row[1] or server_policy()


class _Scan:
    """Walks one message's strings, collecting findings and (when masking) new values."""

    def __init__(self, index: int, masking: bool) -> None:
        self.index, self.masking = index, masking
        self.found: list[FoundSecret] = []

    def text(self, value: str, location: str) -> str:
        findings = find_secrets(value)
        if not findings:
            return value
        self.found += [FoundSecret(self.index, location, f.kind, f.start, f.end) for f in findings]
        return mask(value, findings) if self.masking else value

    def value(self, value: Any, location: str) -> Any:
        if isinstance(value, str):
            return self.text(value, location)
        if isinstance(value, dict):
            return {k: self.value(v, f"{location}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, f"{location}[{i}]") for i, v in enumerate(value)]
        return value

    def part(self, part: PartInput, position: int) -> PartInput:
        columns = dict(part.columns)
        for name in SCANNED_PART_COLUMNS:
            if columns.get(name) is not None:
                columns[name] = self.value(columns[name], f"parts[{position}].{name}")
        return replace(part, columns=columns) if columns != part.columns else part

    def message(self, item: MessageInput) -> MessageInput:
        content = self.text(item.content, "content")
        parts = tuple(self.part(p, i) for i, p in enumerate(item.parts))
        if content is item.content and all(a is b for a, b in zip(parts, item.parts, strict=True)):
            return item
        return replace(item, content=content, parts=parts)


def _scan(messages: Sequence[MessageInput], masking: bool) -> tuple[list, list[FoundSecret]]:
    out, found = [], []
    for index, item in enumerate(messages):
        scan = _Scan(index, masking)
        out.append(scan.message(item))
        found += scan.found
    return out, found


def guard_messages(
    *, conversation_id: int, messages: Sequence[MessageInput], policy: str | None = None
) -> Guarded:
    """The batch as the policy stores it, and what was found in it."""
    if policy == SecretPolicy.OFF:
        return Guarded(list(messages), [], "")
    _, found = _scan(messages, masking=False)
    if not found:
        return Guarded(list(messages), [], "")
    policy = policy or policy_for(conversation_id)
    if policy == SecretPolicy.OFF:
        return Guarded(list(messages), [], "")
    if policy == SecretPolicy.FLAG:
        return Guarded(list(messages), found, SecretAction.FLAGGED)
    masked, found = _scan(messages, masking=True)
    return Guarded(masked, found, SecretAction.MASKED)


def mask_text(text: str, policy: str) -> str:
    """`text` as the policy stores it (masked only under `mask`): for text that is stored
    beside the messages (an imported summary)."""
    if policy != SecretPolicy.MASK:
        return text
    findings = find_secrets(text)
    return mask(text, findings) if findings else text


# The keys of a content block that hold what a person or a tool wrote (not images, ids or
# the provider's opaque signatures).
_BLOCK_TEXT_KEYS = ("text", "content", "input")


def _blocks(scan: _Scan, content: Any, location: str = "content") -> Any:
    if isinstance(content, str):
        return scan.text(content, location)
    if not isinstance(content, list):
        return content
    out = []
    for i, block in enumerate(content):
        if isinstance(block, dict):
            block = dict(block)
            for key in _BLOCK_TEXT_KEYS:
                if key in block:
                    inner = block[key]
                    where = f"{location}[{i}].{key}"
                    block[key] = (
                        _blocks(scan, inner, where)
                        if key == "content"
                        else scan.value(inner, where)
                    )
        out.append(block)
    return out


def guard_content(*, conversation_id: int, content: Any) -> Any:
    """A turn's content (a string or content blocks: text, tool_use input, tool_result
    content) as the conversation's policy stores it: masked under `mask`, else as sent
    (a flagged secret is recorded when the turn is mirrored into the conversation)."""
    probe = _Scan(0, masking=False)
    _blocks(probe, content)
    if not probe.found or policy_for(conversation_id) != SecretPolicy.MASK:
        return content
    return _blocks(_Scan(0, masking=True), content)


def record_findings(
    *, conversation_id: int, guarded: Guarded, message_ids: Sequence[int | None], now
) -> None:
    """Store the batch's findings; `message_ids[i]` is the id of the batch's message i, or
    None when it was not stored by this append (a re-sent external id). Call inside the
    append's transaction."""
    if not guarded.found:
        return
    SecretFinding.objects.bulk_create(
        [
            SecretFinding(
                conversation_id=conversation_id,
                message_id=message_ids[f.index],
                kind=f.kind,
                location=f.location[:255],
                start=f.start,
                end=f.end,
                action=guarded.action,
                created_at=now,
            )
            for f in guarded.found
            if message_ids[f.index] is not None
        ]
    )
