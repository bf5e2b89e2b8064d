"""A forked session whose file begins with its parent's records, stored once.

Codex writes a fork (`codex fork`, `/fork`, backtracking) as a new rollout: its own
`session_meta` with `forked_from_id`, then its parent's rollout items as they were (the
parent's `session_meta` among them, with new timestamps), cut where the fork was made,
then the fork's own lines. Imported as they come, the parent's messages would be stored
twice: in the parent's conversation and again in the fork's.

So every message of a format that forks carries a fingerprint of what it says (role,
content and parts; not its time, id or metadata) in `importers_importedmessage.source`.
A fork's messages after its own header are compared, in order, with its parent's *view*:
the parent's messages, or, when the parent is itself a fork, the grandparent's view up to
the parent's fork point and then the parent's own. The longest run that says the same is
the replay, and is not stored again; it stops at the first message that differs and at any
message the fork's conversation holds already (so a re-import decides as the first one
did). The fork's import row records `parent_conversation_id`, `replayed_messages` (how
much of the parent's view it holds after its header), `fork_point` (the last of them) and
`header_messages` (its own messages before the replay: its session_meta's instructions).

Nothing is lost when the comparison cannot be made: a parent not imported yet, or
imported before fingerprints were kept, leaves the replay stored in the fork as before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from conversations.models import Conversation, Message
from importers.models import Format, ImportedConversation, ImportedMessage
from importers.transcripts.common import ForkOf

FORMATS = {Format.CODEX}  # whose messages keep a fingerprint
_MAX_ANCESTORS = 32  # a fork of a fork of ...: a bound, so a cycle of ids cannot loop


def fingerprint(raw: dict) -> str:
    """What a raw message says, the same in the parent's file and in a fork's replay."""
    parts = [_said_by(part) for part in raw.get("parts") or [] if isinstance(part, dict)]
    said = {"role": raw.get("role"), "content": raw.get("content") or "", "parts": parts}
    text = json.dumps(said, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _said_by(part: dict) -> dict:
    said = {k: v for k, v in part.items() if k != "metadata"}
    if (part.get("metadata") or {}).get("call_id_from_line"):  # differs in a fork's replay
        said.pop("tool_call_id", None)
    return said


@dataclass(frozen=True)
class Replay:
    parent_conversation_id: int | None  # None: the parent is not imported (yet)
    count: int  # how many of the fork's messages after its header are the parent's
    fork_point: str | None  # the external id of the last of them
    header: int  # the fork's own messages before the replay (its session_meta's)

    def metadata(self) -> dict:
        if self.parent_conversation_id is None:
            return {}
        return {
            "parent_conversation_id": self.parent_conversation_id,
            "replayed_messages": self.count,
            "fork_point": self.fork_point,
            "header_messages": self.header,
        }


def find_replay(
    *,
    owner,
    fork_of: ForkOf,
    candidates: Sequence[tuple[str, str]],
    header: int,
    conversation_id: int | None,
) -> Replay:
    """`candidates`: (external id, fingerprint) of the fork's messages after its header;
    `header`: how many come before them."""
    parent = (
        Conversation.objects.filter(owner=owner, session_id=fork_of.parent_session)
        .values_list("pk", flat=True)
        .first()
    )
    if parent is None or parent == conversation_id:
        return Replay(None, 0, None, header)
    target = view(parent)
    candidates = candidates[: len(target)]  # a replay is never longer than the parent
    stored: set[str] = set()
    if conversation_id is not None:
        stored = set(
            Message.objects.filter(
                conversation_id=conversation_id, external_id__in=[e for e, _ in candidates]
            ).values_list("external_id", flat=True)
        )
    count = 0
    for (external_id, said), (_, parent_said) in zip(candidates, target, strict=False):
        if external_id in stored or said != parent_said:
            break
        count += 1
    return Replay(parent, count, target[count - 1][0] if count else None, header)


def view(conversation_id: int) -> list[tuple[str, str]]:
    """(external id, fingerprint) of what the conversation says from its start, as its
    file says it: a fork's header, its parent's view up to the fork point, the rest."""
    chain: list[tuple[int, int, int]] = []  # (conversation, replayed, header)
    seen: set[int] = set()
    current: int | None = conversation_id
    while current is not None and current not in seen and len(chain) < _MAX_ANCESTORS:
        seen.add(current)
        metadata = (
            ImportedConversation.objects.filter(conversation_id=current)
            .values_list("metadata", flat=True)
            .first()
        ) or {}
        count = metadata.get("replayed_messages") or 0
        chain.append((current, count, metadata.get("header_messages") or 0))
        parent = metadata.get("parent_conversation_id") if count else None
        current = parent if isinstance(parent, int) else None
    said: list[tuple[str, str]] = []
    for conversation, count, header in reversed(chain):
        own = _own(conversation)
        said = own[:header] + said[:count] + own[header:]
    return said


def _own(conversation_id: int) -> list[tuple[str, str]]:
    rows = (
        ImportedMessage.objects.filter(conversation_id=conversation_id)
        .order_by("message__seq")
        .values_list("source_id", "source")
    )
    return [(source_id, (source or {}).get("fingerprint") or "") for source_id, source in rows]


def record_fingerprints(conversation_id: int, rows: Sequence[tuple[int, str, str]]) -> None:
    """(message id, external id, fingerprint) of messages stored or found stored; a row
    already there stays (two importers of one file at once both get here)."""
    ImportedMessage.objects.bulk_create(
        [
            ImportedMessage(
                message_id=message_id,
                conversation_id=conversation_id,
                source_id=external_id,
                source={"fingerprint": said},
            )
            for message_id, external_id, said in rows
        ],
        ignore_conflicts=True,
    )
