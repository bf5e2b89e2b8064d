"""Import a transcript file: parse it, then append each conversation's messages in
batches through `conversations.services.messages_append` (which intercepts large files,
keeps external ids idempotent, and writes each batch in one transaction: a batch is all
in or all out).

Every message is validated like an API append (`parse_message`); one that is refused is
reported with its line number and left out, and nothing else stops.

A fork's replay of its parent's records is left out when the parent holds them
(`forks.py`); each message of a format that forks keeps its fingerprint for that.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from django.db import DatabaseError

from conversations.inputs import MessageInput, parse_message
from conversations.models import Conversation, Message
from conversations.services import conversation_create
from core.api.errors import InvalidInput, LcmError
from importers import join
from importers.models import Format, ImportedConversation
from importers.report import ConversationResult, ImportReport
from importers.session_facts import record_session_facts
from importers.transcripts import (
    anthropic,
    claude_code,
    codex,
    forks,
    gemini,
    jsonl,
    openai,
    opencode,
)
from importers.transcripts.agent_compactions import link_agent_compactions
from importers.transcripts.common import Parsed, ParsedConversation, read_json, read_jsonl

BATCH = 500


def parse_file(format: str, path: Path, session_id: str | None) -> Parsed:
    default = session_id or path.stem
    if format == Format.CLAUDE_CODE:
        result, _ = claude_code.parse_with_subagents(
            path, session_id=session_id, default_session=default
        )
        return result
    if format == Format.CODEX:
        parsed = Parsed()
        lines = read_jsonl(path, parsed)
        result = codex.parse(lines, session_id=session_id, default_session=default)
        result.errors[:0] = parsed.errors
        return result
    if format == Format.GEMINI:
        return _parse_gemini(path, session_id, default)
    if format == Format.OPENCODE:
        return _parse_opencode(path, session_id)
    if format == Format.JSONL:
        parsed = Parsed()
        lines = read_jsonl(path, parsed)
        result = jsonl.parse(lines, session_id=default)
        result.errors[:0] = parsed.errors
        return result
    document = read_json(path)
    module = anthropic if format == Format.ANTHROPIC else openai
    return module.parse(document, session_id=default)


def _parse_gemini(path: Path, session_id: str | None, default: str) -> Parsed:
    if path.suffix in (".jsonl", ".zst"):
        parsed = Parsed()
        lines = read_jsonl(path, parsed)
        result = gemini.parse(None, session_id=session_id, default_session=default, lines=lines)
        result.errors[:0] = parsed.errors
    else:
        result = gemini.parse(read_json(path), session_id=session_id, default_session=default)
    folder = gemini.project_folder(path)
    if folder is not None:  # ~/.gemini/tmp/<project>/chats/: the project's name and root
        root = gemini.project_root(folder)
        for conversation in result.conversations:
            conversation.metadata.setdefault("project", folder.name)
            if root and not conversation.metadata.get("cwd"):
                conversation.metadata["cwd"] = root
    if path.parent.parent.name == "chats":  # chats/<parent session id>/<id>.jsonl
        for conversation in result.conversations:
            conversation.metadata.update(line="subagent", parent_session=path.parent.name)
    for conversation in result.conversations:
        if conversation.metadata.get("kind") == "subagent":  # the header says so
            conversation.metadata["line"] = "subagent"
    return result


def _parse_opencode(path: Path, session_id: str | None) -> Parsed:
    """A database, a storage/ tree (a folder) or `opencode export` JSON."""
    parsed = Parsed()
    if path.is_dir():
        sessions = opencode.read_storage(path, parsed)
    elif _is_sqlite(path):
        try:
            sessions = opencode.read_database(path, parsed)
        except sqlite3.DatabaseError as error:
            raise InvalidInput(f"{path.name} is not an OpenCode database: {error}") from None
    else:
        sessions = opencode.read_export(read_json(path), parsed)
    result = opencode.to_parsed(sessions, session_id=session_id)
    result.errors[:0] = parsed.errors
    return result


def _is_sqlite(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(16) == b"SQLite format 3\x00"


class Pending(NamedTuple):
    line: int
    item: MessageInput
    said: str  # what it says (forks.fingerprint), for the formats that fork


def _validated(line: int, raw: dict, report: ImportReport) -> MessageInput | None:
    raw = dict(raw)
    if isinstance(raw.get("created_at"), int | float):  # epoch seconds (OpenAI objects)
        raw["created_at"] = datetime.fromtimestamp(raw["created_at"], tz=UTC).isoformat()
    if raw.get("created_at") is None:
        raw.pop("created_at", None)
    try:
        return parse_message(raw)
    except LcmError as error:
        report.line_error(line, error.message)
        return None


def _pending(format: str, conversation: ParsedConversation, report: ImportReport) -> list:
    pending = []
    for line, raw in conversation.messages:
        item = _validated(line, raw, report)
        if item is not None:
            said = forks.fingerprint(raw) if format in forks.FORMATS else ""
            pending.append(Pending(line, item, said))
    return pending


def import_transcript(
    *,
    format: str,
    path: Path,
    owner,
    session_id: str | None,
    dry_run: bool,
    report: ImportReport,
    advance: Callable[[int], None] | None = None,
    set_total: Callable[[int], None] | None = None,
) -> ImportReport:
    parsed = parse_file(format, path, session_id)
    report.errors.extend(parsed.errors)
    if parsed.skipped:
        report.notes["skipped_records"] = dict(parsed.skipped)
    if set_total is not None:
        set_total(sum(len(c.messages) for c in parsed.conversations))
    for conversation in parsed.conversations:
        result = ConversationResult(session_id=conversation.session_id)
        report.conversations.append(result)
        pending = _pending(format, conversation, report)
        if dry_run:
            _count_dry(result, owner, conversation, pending, report)
        else:
            _append(result, owner, format, str(path), conversation, pending, report)
            if result.conversation_id is not None and not result.failed:
                record_session_facts(result.conversation_id, format, conversation.metadata)
                link_agent_compactions(result.conversation_id, conversation.compactions, result)
        if advance is not None:
            advance(len(conversation.messages))
    return report


def _without_replay(
    owner, conversation: ParsedConversation, pending: list, conversation_id, report
) -> list:
    """A fork's messages less those its parent holds already (importers/transcripts/forks.py)."""
    fork_of = conversation.fork_of
    if fork_of is None:
        return pending
    after = [p for p in pending if p.line > fork_of.replay_after_line]
    replay = forks.find_replay(
        owner=owner,
        fork_of=fork_of,
        candidates=[(p.item.external_id, p.said) for p in after],
        header=len(pending) - len(after),
        conversation_id=conversation_id,
    )
    conversation.metadata.update(replay.metadata())
    report.notes.setdefault("forks", []).append(
        {
            "session_id": conversation.session_id,
            "parent_session": fork_of.parent_session,
            "parent_imported": replay.parent_conversation_id is not None,
            "replayed_messages": replay.count,
        }
    )
    replayed = {p.item.external_id for p in after[: replay.count]}
    # The parent's compactions came with the replay: linked in the parent already.
    conversation.compactions = [
        c for c in conversation.compactions if c.at_external_id not in replayed
    ]
    return [p for p in pending if p.item.external_id not in replayed]


def _count_dry(result: ConversationResult, owner, conversation, pending, report) -> None:
    existing = Conversation.objects.filter(owner=owner, session_id=result.session_id).first()
    pending = _without_replay(owner, conversation, pending, existing and existing.pk, report)
    result.conversation_id = existing.pk if existing else None
    result.created = existing is None
    result.counts["conversations"] = int(existing is None)
    known = set()
    if existing is not None:
        known = set(
            Message.objects.filter(conversation=existing).values_list("external_id", flat=True)
        )
    new = [p.item for p in pending if p.item.external_id not in known]
    result.counts["messages"] = len(new)
    result.counts["message_parts"] = sum(len(item.parts) for item in new)
    result.counts["context_items"] = len(new)


def _append(
    result: ConversationResult, owner, format: str, path: str, conversation, pending, report
) -> None:
    try:
        stored, created = conversation_create(
            owner=owner, session_id=result.session_id, title=conversation.title[:10_000]
        )
    except LcmError as error:
        result.failed = error.message
        result.problem(error.code, error.message)
        return
    if created or not ImportedConversation.objects.filter(conversation=stored).exists():
        # Also on a conversation the drop-in began (the session seen from both sides:
        # importers/join.py): the drop-in then joins what it stores with the import.
        ImportedConversation.objects.get_or_create(
            conversation=stored,
            defaults={"format": format, "source_key": result.session_id, "source_path": path},
        )
    result.conversation_id = stored.pk
    result.created = created
    result.counts["conversations"] = int(created)
    pending = _without_replay(owner, conversation, pending, stored.pk, report)
    for start in range(0, len(pending), BATCH):
        _append_batch(result, stored.pk, format, pending[start : start + BATCH])


def _append_batch(result: ConversationResult, conversation_id: int, format: str, batch) -> None:
    try:
        appended = join.append(
            conversation_id=conversation_id, messages=[p.item for p in batch], side=join.IMPORT
        )
    except (LcmError, DatabaseError) as error:
        message = getattr(error, "message", None) or str(error)
        lines = f"lines {batch[0].line}-{batch[-1].line}"
        result.problem("batch_failed", f"{lines}: nothing of this batch was stored: {message}")
        return
    if format in forks.FORMATS:  # stored now or before: a later fork compares with them
        forks.record_fingerprints(
            conversation_id,
            [
                (a.message.pk, p.item.external_id, p.said)
                for p, a in zip(batch, appended, strict=True)
                if p.item.external_id and a.message.external_id == p.item.external_id
            ],
        )
    new = [a for a in appended if a.created]
    result.counts["messages"] += len(new)
    result.counts["context_items"] += len(new)
    result.counts["message_parts"] += sum(
        len(p.item.parts) for p, a in zip(batch, appended, strict=True) if a.created
    )
    result.counts["large_files"] += len({f for a in new for f in a.message.file_ids})
