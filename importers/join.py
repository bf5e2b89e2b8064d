"""One agent session seen from two sides, stored once (docs/capture.md, "Seen through the
drop-in too").

A Claude Code, Codex or OpenCode session can reach the product twice: through the drop-in
(each request's new messages, `dropin:<chain hash>`) and through capture (the watcher,
hooks or an import of its session file, `claude-code:<uuid>`, `codex:<session>:<line>`).
Both name the same conversation: the drop-in creates a session's conversation under the
agent's own session id, the one the importer uses (dropin/agent_sessions.py), so whichever
comes first, the other finds it.

Inside it, the two sides write the same content in different cuts (Claude Code writes one
record per content block of an answer; a request merges consecutive user content and adds
its system reminders), so they are joined by **content keys**, not by position: a tool
call's id (`call:<id>`), a tool result's (`result:<id>`), a text, a thinking block or a
reasoning item (a hash of it). The side that comes second appends, for each message:

* nothing, when every keyed part of it is already stored by the other side: one
  `JoinedRecord` per key names the message that holds it (with the record's own facts:
  its uuid, parent, time, model, usage);
* the parts not stored yet (a request's system reminder, an answer block the watcher has
  not read), as a message of its own, plus a `JoinedRecord` for each part found;
* the whole message when none of its keys is found.

Stored messages, parts and lineage are never changed. A key of the other side's message
is claimed once (so two equal "yes" prompts join two different messages), the earliest
unclaimed first, at or after the last message this side joined.

Both sides decide and write under one lock per conversation (`core.locks.held`,
PostgreSQL), so a watcher importing while drop-in requests arrive stores each message
once. SQLite has no such lock across the two transactions: see docs/capture.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace

from django.db.models import Max

from conversations.inputs import MessageInput, PartInput
from conversations.models import Message
from conversations.models import MessagePart as Part
from conversations.services import AppendedMessage, messages_append
from core import locks
from importers.models import ImportedConversation, JoinedRecord

DROPIN_PREFIX = "dropin:"
IMPORT = "import"
DROPIN = "dropin"


# content keys -------------------------------------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()  # noqa: S324 (a key)


def _encrypted(metadata: dict) -> str | None:
    """A reasoning item's opaque content, where either side keeps it."""
    if metadata.get("encrypted_content"):
        return metadata["encrypted_content"]
    block = metadata.get("block")
    if isinstance(block, dict):
        raw = block.get("raw") if isinstance(block.get("raw"), dict) else {}
        return block.get("encrypted_content") or raw.get("encrypted_content")
    return None


def part_keys(part_type: str, columns: dict) -> list[str]:
    """What identifies a part whichever side stored it (empty: it joins nothing)."""
    metadata = columns.get("metadata") or {}
    if part_type == "tool" and columns.get("tool_call_id"):
        call = columns["tool_call_id"]
        has_result = columns.get("tool_output") is not None or columns.get("tool_error") is not None
        keys = []
        if columns.get("tool_input") is not None or not has_result:
            keys.append(f"call:{call}")
        if has_result:
            keys.append(f"result:{call}")
        return keys
    text = (columns.get("text_content") or "").strip()
    if part_type == "text":
        return [f"text:{_digest(text)}"] if text else []
    if part_type == "reasoning":
        opaque = _encrypted(metadata) or metadata.get("signature") or metadata.get("redacted")
        if isinstance(opaque, str) and opaque:
            return [f"reasoning:{_digest(opaque)}"]
        return [f"reasoning:{_digest(text)}"] if text else []
    return []


def _stored_keys(message_ids: list[int]) -> dict[int, list[str]]:
    keys: dict[int, list[str]] = {m: [] for m in message_ids}
    fields = ("tool_call_id", "tool_input", "tool_output", "tool_error", "text_content")
    rows = Part.objects.filter(message_id__in=message_ids).values(
        "message_id", "part_type", "metadata", *fields
    )
    for row in rows.order_by("message_id", "ordinal"):
        keys[row["message_id"]].extend(part_keys(row["part_type"], row))
    return keys


# appending ----------------------------------------------------------------------------------


def _is_other_side(external_id: str | None, side: str) -> bool:
    if not external_id:
        return False
    return external_id.startswith(DROPIN_PREFIX) == (side == IMPORT)


def append(
    *,
    conversation_id: int,
    messages: Sequence[MessageInput],
    side: str,
    facts: Sequence[dict] | None = None,
) -> list[AppendedMessage]:
    """`messages_append`, less what the other side of the session stored already (one
    result per message: a joined one's is the message holding it, `created` False)."""
    if not messages:
        return []
    with locks.held(locks.LockKind.SESSION_JOIN, conversation_id):
        if not _joined(conversation_id, side):
            return messages_append(conversation_id=conversation_id, messages=messages)
        return _Join(conversation_id, side).append(list(messages), list(facts or []))


def append_kept(
    *, conversation_id: int, messages: Sequence[MessageInput], kept_from: Sequence[int]
) -> list[MessageInput]:
    """After an agent's compaction its requests repeat the last messages it kept (Claude
    Code resends its last answer after the summary): each message whose content keys
    (thinking aside) are exactly those of one of `kept_from` (the messages before the compaction, newest
    last) is joined with it (a `JoinedRecord` per key) instead of stored again. Returns
    the messages still to store."""
    held = {m: _visible(k) for m, k in _stored_keys(list(kept_from)).items()}
    rest: list[MessageInput] = []
    links: list[JoinedRecord] = []
    for item in messages:
        keys = [k for p in item.parts for k in part_keys(p.part_type, p.columns)]
        match = next(
            (
                m
                for m in reversed(list(kept_from))
                if _visible(keys) and held.get(m) == _visible(keys)
            ),
            None,
        )
        if match is None or not item.external_id:
            rest.append(item)
            continue
        held.pop(match)
        links.extend(
            JoinedRecord(
                conversation_id=conversation_id,
                source_id=item.external_id,
                key=key,
                message_id=match,
                facts={"kept_after_compaction": True},
            )
            for key in dict.fromkeys(keys)
        )
    JoinedRecord.objects.bulk_create(links, ignore_conflicts=True)
    return rest


def _visible(keys: list[str]) -> list[str]:
    """The keys that say what a message is (as the drop-in's identity: thinking aside)."""
    return sorted(k for k in keys if not k.startswith("reasoning:"))


def _joined(conversation_id: int, side: str) -> bool:
    """Whether the other side has written to this conversation."""
    if side == DROPIN:
        return ImportedConversation.objects.filter(pk=conversation_id).exists()
    return Message.objects.filter(
        conversation_id=conversation_id, external_id__startswith=DROPIN_PREFIX
    ).exists()


class _Join:
    def __init__(self, conversation_id: int, side: str):
        self.conversation_id = conversation_id
        self.side = side
        own = JoinedRecord.objects.filter(conversation_id=conversation_id)
        own = (
            own.filter(source_id__startswith=DROPIN_PREFIX)
            if side == DROPIN
            else own.exclude(source_id__startswith=DROPIN_PREFIX)
        )
        self.own = own
        last = own.aggregate(last=Max("message__seq"))["last"] or 0
        self.cursor = last
        candidates = list(
            Message.objects.filter(conversation_id=conversation_id, seq__gte=last)
            .exclude(external_id__isnull=True)
            .order_by("seq")
            .values_list("pk", "seq", "external_id")
        )
        candidates = [c for c in candidates if _is_other_side(c[2], side)]
        self.seq = {pk: seq for pk, seq, _ in candidates}
        claimed = set(own.filter(message_id__in=list(self.seq)).values_list("message_id", "key"))
        # key -> [message ids holding it, unclaimed, in seq order]
        self.available: dict[str, list[int]] = {}
        for message_id, keys in _stored_keys(list(self.seq)).items():
            for key in keys:
                if (message_id, key) not in claimed:
                    self.available.setdefault(key, []).append(message_id)
        for holders in self.available.values():
            holders.sort(key=self.seq.__getitem__)

    def _claim(self, key: str) -> int | None:
        holders = self.available.get(key)
        if not holders:
            return None
        chosen = next((m for m in holders if self.seq[m] >= self.cursor), holders[0])
        holders.remove(chosen)
        self.cursor = max(self.cursor, self.seq[chosen])
        return chosen

    def append(self, items: list[MessageInput], facts: list[dict]) -> list[AppendedMessage]:
        done = self._done(items)
        results: list[AppendedMessage | None] = []
        to_store: list[tuple[int, MessageInput]] = []
        links: list[JoinedRecord] = []
        for index, item in enumerate(items):
            if item.external_id in done:
                results.append(AppendedMessage(done[item.external_id], created=False))
                continue
            stored, found = self._split(item)
            fact = _facts(item, facts[index] if index < len(facts) else None)
            links.extend(
                JoinedRecord(
                    conversation_id=self.conversation_id,
                    source_id=item.external_id or "",
                    key=key,
                    message_id=message_id,
                    facts=fact,
                )
                for key, message_id in found
            )
            if stored is None:
                results.append(AppendedMessage(Message(pk=found[0][1]), created=False))
            else:
                results.append(None)
                to_store.append((index, stored))
        appended = messages_append(
            conversation_id=self.conversation_id, messages=[item for _, item in to_store]
        )
        for (index, _), result in zip(to_store, appended, strict=True):
            results[index] = result
        JoinedRecord.objects.bulk_create(links, ignore_conflicts=True)
        return [r for r in results if r is not None]

    def _done(self, items: list[MessageInput]) -> dict[str, Message]:
        """This side's messages stored or joined by an earlier run (a re-import, a resent
        request): external id -> the message that holds it."""
        ids = [i.external_id for i in items if i.external_id]
        done = {
            m.external_id: m
            for m in Message.objects.filter(
                conversation_id=self.conversation_id, external_id__in=ids
            )
        }
        for source_id, message_id in self.own.filter(source_id__in=ids).values_list(
            "source_id", "message_id"
        ):
            done.setdefault(source_id, Message(pk=message_id))
        return done

    def _split(self, item: MessageInput) -> tuple[MessageInput | None, list[tuple[str, int]]]:
        """(what to store of the message, or None; [(key, message id)] found stored)."""
        found: list[tuple[str, int]] = []
        kept: list[PartInput] = []  # the parts not found, and those that join nothing
        for part in item.parts:
            keys = part_keys(part.part_type, part.columns)
            holders = [(key, self._claim(key)) for key in keys]
            found.extend((key, m) for key, m in holders if m is not None)
            if not keys or any(m is None for _, m in holders):
                kept.append(part)
        if not found:
            return item, []
        if all(not part_keys(p.part_type, p.columns) for p in kept):
            return None, found
        parts = tuple(PartInput(p.part_type, n, p.columns) for n, p in enumerate(kept))
        return replace(item, content="", parts=parts), found


def _facts(item: MessageInput, given: dict | None) -> dict:
    """What the joined record says beyond its content: its source metadata (Claude Code:
    uuid, parent uuid, model, response id, usage) and its time."""
    facts: dict = dict(given or {})
    for part in item.parts:
        source = (part.columns.get("metadata") or {}).get("source")
        if isinstance(source, dict):
            facts.setdefault("source", source)
            break
    if item.created_at is not None:
        facts.setdefault("created_at", item.created_at.isoformat())
    return facts


# reads --------------------------------------------------------------------------------------


def messages_of(conversation_id: int, external_ids: Sequence[str]) -> dict[str, int]:
    """external id -> the message holding it, stored or joined (the first, for a record
    whose content two messages hold)."""
    found = dict(
        Message.objects.filter(
            conversation_id=conversation_id, external_id__in=list(external_ids)
        ).values_list("external_id", "pk")
    )
    rest = [e for e in external_ids if e not in found]
    if rest:
        rows = JoinedRecord.objects.filter(conversation_id=conversation_id, source_id__in=rest)
        for source_id, message_id in rows.order_by("message__seq").values_list(
            "source_id", "message_id"
        ):
            found.setdefault(source_id, message_id)
    return found


def source_ids_of(message_id: int, prefix: str) -> list[str]:
    """The ids (of one side, by prefix) of the records a message holds for that side."""
    return list(
        JoinedRecord.objects.filter(message_id=message_id, source_id__startswith=prefix)
        .values_list("source_id", flat=True)
        .distinct()
    )
