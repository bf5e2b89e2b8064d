"""Import a lossless-claw database: one conversation per source conversation, with its
messages and parts, summaries with their lineage, active context and large files.

Each source conversation is imported in ONE transaction, under the conversation's
compaction lock and row lock (what appends and compaction take), so a failure halfway
leaves nothing of that conversation; the other conversations still import.

Idempotent: a message is known by its source `message_id` (importers_importedmessage), a
summary by its id, a file by its source id. A second import of the same database writes
no row; an import after the source grew writes only the new rows. The active context is
replaced only when the source's context changed since the last import (so a native
compaction done here after an import is kept while the source is unchanged).
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from conversations import bulk
from conversations.inputs import MessageInput, PartInput
from conversations.models import (
    ContextItem,
    Conversation,
    ItemType,
    Message,
    MessagePart,
    Role,
    Summary,
    SummaryKind,
    SummaryLevel,
    SummaryMessage,
    SummaryParent,
)
from conversations.secret_guard import (
    Guarded,
    guard_messages,
    mask_text,
    policy_for,
    record_findings,
)
from conversations.services import MESSAGE_COLUMNS, message_text_and_tokens
from core import locks
from core.token_estimate import estimate
from importers.losslessclaw.files import resolve_file
from importers.losslessclaw.mapping import clean_text, map_part, parse_time, source_extras
from importers.losslessclaw.source import Source, json_value
from importers.models import (
    Format,
    ImportedConversation,
    ImportedFile,
    ImportedMessage,
    ImportedSummary,
)
from importers.report import ConversationResult, ImportReport, empty_counts
from largefiles.explore import count_lines
from largefiles.mime import guess_file_type
from largefiles.models import LargeFile
from largefiles.reference import find_file_ids, new_file_id
from largefiles.store import delete_objects, storage_key, write_object

logger = logging.getLogger("lcm.importers")

_MESSAGE_EXTRAS = (
    "identity_hash",
    "transcript_entry_id",
    "large_content",
    "stable_event_key",
    "openclaw_sender_metadata",
)
_SUMMARY_EXTRAS = (
    "descendant_count",
    "descendant_token_count",
    "source_message_token_count",
    "created_at",
)
_PART_KEY = ("message_id", "session_id", "part_type", "ordinal")
_TRUNCATION_MARK = "[Truncated for context management]"
_ROLES = frozenset(Role.values)  # enum .values rebuilds its list on every access


class _Abort(Exception):
    """Stop this conversation's import; its transaction rolls back."""

    def __init__(self, code: str, message: str, **extra):
        super().__init__(message)
        self.code, self.message, self.extra = code, message, extra


@dataclass
class _SourceData:
    row: object
    messages: list
    parts: dict[int, list[PartInput]]
    part_ids: dict[int, list[str]]
    summaries: list
    message_edges: dict[str, list[int]]
    parent_edges: dict[str, list[str]]
    context: list
    files: list


@dataclass
class _State:
    """What this conversation already holds (empty for a new one)."""

    conversation: Conversation | None
    messages: dict[str, tuple[int, int, object]] = field(
        default_factory=dict
    )  # src -> (id, tokens, at)
    summaries: dict[str, Summary] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # source file id -> our file id
    file_shas: dict[str, str] = field(default_factory=dict)  # sha256 -> our file id
    max_source_seq: int = 0
    secret_policy: str = ""  # the conversation's effective secret policy, once read


@dataclass(frozen=True)
class _NewMessage:
    """A source message prepared as a canonical row (before its key is known)."""

    row: object
    parts: list[PartInput]
    content: str
    tokens: int
    file_ids: list[str]
    role: str
    seq: int
    created_at: object
    secrets: Guarded | None = None  # what the secret scan found (recorded once stored)


def _free_file_id(source_id: str) -> str:
    """The source's file id when it is one of ours and free, else a new one (the id is
    taken by another import of this source, or is not of our form)."""
    if (
        not source_id.startswith("file_")
        or len(source_id) > 32
        or LargeFile.objects.filter(pk=source_id).exists()
    ):
        return new_file_id()
    return source_id


def _summary_problem(sid: str, kind: str, message_ids: list, parent_ids: list) -> str | None:
    """Why a summary cannot be imported with the sources that could be linked, if it cannot."""
    if kind not in SummaryKind.values:
        return f"{sid}: unknown kind {kind!r}"
    if message_ids and parent_ids:
        return f"{sid}: links both messages and summaries"
    if kind == SummaryKind.LEAF and not message_ids:
        return f"{sid}: a leaf summary with no source message that could be linked"
    if kind == SummaryKind.CONDENSED and not parent_ids:
        return f"{sid}: a condensed summary with no source summary that could be linked"
    if not sid.startswith("sum_") or len(sid) > 32:
        return f"{sid}: not a summary id of the form sum_<hex>"
    return None


def _refuse_taken_summary_ids(conversation: Conversation, ids: list[str]) -> None:
    """Summary ids are kept: one that belongs to another conversation stops the import."""
    taken = list(
        Summary.objects.filter(pk__in=ids)
        .exclude(conversation=conversation)
        .values_list("pk", "conversation_id")[:5]
    )
    if taken:
        raise _Abort(
            "summary_id_taken",
            f"summary {taken[0][0]} already belongs to conversation {taken[0][1]} (this "
            "database was imported before, by another user or under another session id); "
            "summary ids are kept, so this conversation cannot be imported again",
            summary_ids=[t[0] for t in taken],
        )


def _insert_summaries(rows, extras, message_edges, parent_edges) -> None:
    Summary.objects.bulk_create(rows, batch_size=500)
    if message_edges:
        bulk.insert_rows(
            SummaryMessage,
            ("summary_id", "message_id", "conversation_id", "ordinal"),
            message_edges,
        )
    if parent_edges:
        bulk.insert_rows(
            SummaryParent,
            ("summary_id", "parent_summary_id", "conversation_id", "ordinal"),
            parent_edges,
        )
    ImportedSummary.objects.bulk_create(extras, batch_size=500)


def _read_source(source: Source, row) -> _SourceData:
    conversation_id = row["conversation_id"]
    parts: dict[int, list[PartInput]] = defaultdict(list)
    part_ids: dict[int, list[str]] = defaultdict(list)
    for part_row in source.parts(conversation_id):
        parts[part_row["message_id"]].append(map_part(part_row))
        part_ids[part_row["message_id"]].append(part_row["part_id"])
    message_edges: dict[str, list[int]] = defaultdict(list)
    for edge in source.summary_messages(conversation_id):
        message_edges[edge["summary_id"]].append(edge["message_id"])
    parent_edges: dict[str, list[str]] = defaultdict(list)
    for edge in source.summary_parents(conversation_id):
        parent_edges[edge["summary_id"]].append(edge["parent_summary_id"])
    return _SourceData(
        row=row,
        messages=source.messages(conversation_id),
        parts=parts,
        part_ids=part_ids,
        summaries=source.summaries(conversation_id),
        message_edges=message_edges,
        parent_edges=parent_edges,
        context=source.context_items(conversation_id),
        files=source.large_files(conversation_id),
    )


def _read_state(conversation: Conversation | None) -> _State:
    state = _State(conversation=conversation)
    if conversation is None:
        return state
    for message_id, source_id, tokens, at, source in (
        ImportedMessage.objects.filter(conversation=conversation)
        .values_list(
            "message_id", "source_id", "message__token_count", "message__created_at", "source"
        )
        .iterator(chunk_size=5000)
    ):
        state.messages[source_id] = (message_id, tokens, at)
        state.max_source_seq = max(state.max_source_seq, int(source.get("seq") or 0))
    state.summaries = {s.id: s for s in Summary.objects.filter(conversation=conversation)}
    for file_id, sha, source_id in LargeFile.objects.filter(conversation=conversation).values_list(
        "id", "sha256", "import_source__source_id"
    ):
        state.file_shas[sha] = file_id
        state.files[source_id or file_id] = file_id
    return state


class ConversationImport:
    """Plans and writes one source conversation."""

    def __init__(
        self,
        *,
        source: Source,
        data: _SourceData,
        owner,
        files_dir: Path | None,
        result: ConversationResult,
        trust_paths: bool = True,
    ):
        self.source = source
        self.data = data
        self.owner = owner
        self.files_dir = files_dir
        self.trust_paths = trust_paths
        self.result = result
        self.source_key = str(data.row["conversation_id"])
        self.session_id = str(data.row["session_id"])
        self.now = timezone.now()
        self.written_objects: list[str] = []
        self.planned_summaries: set[str] = set()

    # -- the existing conversation ---------------------------------------------------

    def _existing(self, *, lock: bool) -> Conversation | None:
        query = Conversation.objects.filter(owner=self.owner, session_id=self.session_id)
        if lock:
            query = query.select_for_update()
        conversation = query.first()
        if conversation is None:
            return None
        record = ImportedConversation.objects.filter(conversation=conversation).first()
        if record is None or record.format != Format.LOSSLESS_CLAW:
            raise _Abort(
                "session_exists",
                f"conversation {conversation.pk} with session id {self.session_id!r} already "
                "exists and was not imported from lossless-claw; nothing imported for it",
                conversation_id=conversation.pk,
            )
        return conversation

    # -- dry run ---------------------------------------------------------------------

    def dry_run(self) -> None:
        conversation = self._existing(lock=False)
        self.result.conversation_id = conversation.pk if conversation else None
        self.result.created = conversation is None
        state = _read_state(conversation)
        self.result.counts["conversations"] = int(conversation is None)
        for row in self._plan_messages(state):  # stand-ins: what the import would add
            state.messages[str(row["message_id"])] = (None, 0, None)
        self._plan_summaries(state)
        self._plan_context(state)
        new_files = [f for f in self.data.files if f["file_id"] not in state.files]
        self.result.counts["large_files"] = len(new_files)
        for source_file in new_files:
            uri = str(source_file["storage_uri"] or "")
            if (
                resolve_file(
                    uri,
                    db_path=self.source.path,
                    files_dir=self.files_dir,
                    trust_paths=self.trust_paths,
                ).data
                is None
            ):
                self.result.problem(
                    "file_missing",
                    f"{source_file['file_id']}: no bytes at {uri} nor under the files "
                    "directory; it would be kept (summary and references) and marked missing",
                    file_id=source_file["file_id"],
                    storage_uri=uri,
                )

    # -- the import ------------------------------------------------------------------

    def run(self) -> None:
        """Import in one transaction. If a concurrent import created the conversation
        first (its unique session id refuses ours), run once more: the second run finds
        it, under its lock, and adds only what the other did not."""
        try:
            self._run_once()
        except IntegrityError:
            if not self.result.created:
                raise
            self.result.counts = empty_counts()
            self.result.problems = []
            self.result.created = False
            self._run_once()

    def _run_once(self) -> None:
        try:
            with transaction.atomic(durable=True):
                conversation = self._existing(lock=True)
                created = conversation is None
                self.result.created = created
                if created:
                    conversation = Conversation.objects.create(
                        owner=self.owner,
                        session_id=self.session_id,
                        title=clean_text(str(self.data.row["title"] or "")),
                        token_budget=settings.LCM_DEFAULT_TOKEN_BUDGET,
                    )
                    ImportedConversation.objects.create(
                        conversation=conversation,
                        format=Format.LOSSLESS_CLAW,
                        source_key=self.source_key,
                        source_path=str(self.source.path),
                    )
                    self.result.counts["conversations"] = 1
                locks.lock(locks.LockKind.COMPACTION, conversation.pk)
                self.result.conversation_id = conversation.pk
                self.result.created = created
                state = _read_state(conversation)
                if not created:
                    self._refuse_if_diverged(state)
                self._write_files(state)
                self._write_messages(state)
                self._write_summaries(state)
                self._write_context(state)
        except BaseException:
            self._discard_objects()
            raise

    def _refuse_if_diverged(self, state: _State) -> None:
        """Messages appended here since the import would interleave with the source's new
        ones (and drop out of a rebuilt context): refuse rather than mix the two."""
        native = Message.objects.filter(conversation=state.conversation).count() - len(
            state.messages
        )
        if native <= 0:
            return
        grew = any(str(m["message_id"]) not in state.messages for m in self.data.messages)
        record = ImportedConversation.objects.filter(conversation=state.conversation).first()
        context_changed = record is not None and record.context_signature != self._signature()
        if grew or context_changed:
            raise _Abort(
                "conversation_diverged",
                f"conversation {state.conversation.pk} has {native} message(s) added here "
                "since it was imported, and the source changed too; importing would mix the "
                "two histories, so nothing was imported for it",
                conversation_id=state.conversation.pk,
            )

    def _discard_objects(self) -> None:
        if not self.written_objects:
            return
        stored = set(
            LargeFile.objects.filter(storage_key__in=self.written_objects).values_list(
                "storage_key", flat=True
            )
        )
        unused = [key for key in self.written_objects if key not in stored]
        try:
            delete_objects(unused)
        except Exception:  # reported later by the integrity check file_object_unreferenced
            logger.exception("could not remove objects of a failed import: %s", unused)

    # -- large files -----------------------------------------------------------------

    def _write_files(self, state: _State) -> None:
        rows, imported = [], []
        for source_file in self.data.files:
            if source_file["file_id"] in state.files:
                continue
            written = self._import_file(state, source_file)
            if written is not None:
                rows.append(written[0])
                imported.append(written[1])
        LargeFile.objects.bulk_create(rows)
        ImportedFile.objects.bulk_create(imported)
        self.result.counts["large_files"] = len(rows)

    def _import_file(self, state: _State, source_file) -> tuple[LargeFile, ImportedFile] | None:
        """One source file's rows, its bytes stored; None when the same bytes are stored
        already (the source id then maps to that file)."""
        source_id = source_file["file_id"]
        uri = str(source_file["storage_uri"] or "")
        found = resolve_file(
            uri, db_path=self.source.path, files_dir=self.files_dir, trust_paths=self.trust_paths
        )
        if found.data is not None:
            sha = hashlib.sha256(found.data).hexdigest()
            if sha in state.file_shas:  # the same bytes are stored already: one file
                state.files[source_id] = state.file_shas[sha]
                return None
        else:
            sha = hashlib.sha256(f"missing:{source_id}".encode()).hexdigest()
        file_id = _free_file_id(source_id)
        text = found.data.decode("utf-8", errors="replace") if found.data else ""
        name = str(source_file["file_name"] or "")
        file_type = guess_file_type(text, name=name or None, mime=source_file["mime_type"])
        key = storage_key(
            conversation_id=state.conversation.pk, file_id=file_id, extension=file_type.extension
        )
        self._store_file_bytes(key, found.data, source_id=source_id, file_id=file_id, uri=uri)
        byte_size = len(found.data) if found.data is not None else source_file["byte_size"]
        large_file = LargeFile(
            id=file_id,
            conversation=state.conversation,
            file_name=name,
            mime_type=str(source_file["mime_type"] or file_type.mime_type),
            byte_size=int(byte_size or 0),
            line_count=int(source_file["line_count"] or count_lines(text)),
            token_count=estimate(text),
            sha256=sha,
            storage_key=key,
            exploration_summary=clean_text(str(source_file["exploration_summary"] or "")),
            tool_name="",
        )
        record = ImportedFile(
            large_file_id=file_id, source_id=source_id, source_uri=uri, missing=found.data is None
        )
        state.files[source_id] = file_id
        state.file_shas[sha] = file_id
        return large_file, record

    def _store_file_bytes(
        self, key: str, data: bytes | None, *, source_id: str, file_id: str, uri: str
    ) -> None:
        """Write the bytes (removed again if the import fails), or report them missing."""
        if data is not None:
            write_object(key, data)
            self.written_objects.append(key)
            return
        self.result.problem(
            "file_missing",
            f"{source_id}: no bytes at {uri} nor under the files directory; the file "
            "is kept (summary and references) and marked missing",
            file_id=file_id,
            storage_uri=uri,
        )

    def _remap_files(self, state: _State, text: str) -> str:
        for source_id, file_id in state.files.items():
            if source_id != file_id and source_id in text:
                text = text.replace(source_id, file_id)  # same length: same token count
        return text

    # -- messages --------------------------------------------------------------------

    def _plan_messages(self, state: _State) -> list:
        new = [m for m in self.data.messages if str(m["message_id"]) not in state.messages]
        if new and state.messages and int(new[0]["seq"]) < state.max_source_seq:
            self.result.problem(
                "message_inserted_before_imported",
                f"source message {new[0]['message_id']} (seq {new[0]['seq']}) is older than "
                "messages imported before; it is appended after them",
            )
        self.result.counts["messages"] = len(new)
        self.result.counts["message_parts"] = sum(
            len(self.data.parts.get(m["message_id"], ())) for m in new
        )
        return new

    def _write_messages(self, state: _State) -> None:
        new = self._plan_messages(state)
        if not new:
            return
        conversation = state.conversation
        remap = any(s != f for s, f in state.files.items())
        known_files = set(state.files.values())
        state.secret_policy = policy_for(conversation.pk)
        prepared = [
            self._prepare_message(state, row, conversation.last_seq + offset, remap, known_files)
            for offset, row in enumerate(new, start=1)
        ]
        ids = self._insert_messages(conversation, prepared)
        self._insert_parts(ids, prepared)
        self._insert_import_records(conversation, ids, prepared)
        for pk, message in zip(ids, prepared, strict=True):
            if message.secrets is not None:
                record_findings(
                    conversation_id=conversation.pk,
                    guarded=message.secrets,
                    message_ids=[pk],
                    now=self.now,
                )
        for pk, message in zip(ids, prepared, strict=True):
            state.messages[str(message.row["message_id"])] = (
                pk,
                message.tokens,
                message.created_at,
            )
        seq = prepared[-1].seq
        Conversation.objects.filter(pk=conversation.pk).update(last_seq=seq, updated_at=self.now)
        conversation.last_seq = seq

    def _prepare_message(
        self, state: _State, row, seq: int, remap: bool, known_files: set[str]
    ) -> _NewMessage:
        """One source message as a canonical row: text and tokens by ingest's own rule
        (`message_text_and_tokens`), file ids our own, an unknown role stored as user."""
        parts = self.data.parts.get(row["message_id"], [])
        content = clean_text(str(row["content"] or ""))
        if remap:
            parts = [self._remapped_part(state, part) for part in parts]
            content = self._remap_files(state, content)
        # Secrets at ingest, as `messages_append` does: masked or flagged by the policy.
        guarded = guard_messages(
            conversation_id=state.conversation.pk,
            messages=[MessageInput(role=Role.USER, content=content, parts=tuple(parts))],
            policy=state.secret_policy,
        )
        content, parts = guarded.messages[0].content, list(guarded.messages[0].parts)
        content, tokens = message_text_and_tokens(content=content, parts=parts)
        return _NewMessage(
            row=row,
            parts=parts,
            content=content,
            tokens=tokens,
            file_ids=self._message_file_ids(state, content, parts, known_files),
            role=self._message_role(row),
            seq=seq,
            created_at=parse_time(row["created_at"]) or self.now,
            secrets=guarded if guarded.found else None,
        )

    def _remapped_part(self, state: _State, part: PartInput) -> PartInput:
        columns = {
            k: self._remap_files(state, v) if isinstance(v, str) else v
            for k, v in part.columns.items()
        }
        return PartInput(part.part_type, part.ordinal, columns)

    @staticmethod
    def _message_file_ids(
        state: _State, content: str, parts: list[PartInput], known_files: set[str]
    ) -> list[str]:
        """The conversation's files the message names: in part metadata, then in its text
        and tool outputs, in that order, each once."""
        mentioned = (
            content
            + "\n"
            + "\n".join(
                str(p.columns.get(k) or "") for p in parts for k in ("tool_output", "text_content")
            )
        )
        metadata_ids = [
            p.columns["metadata"].get("externalizedFileId")
            for p in parts
            if isinstance(p.columns.get("metadata"), dict)
        ]
        file_ids = [
            state.files.get(f, f)
            for f in dict.fromkeys(
                [*(f for f in metadata_ids if isinstance(f, str)), *find_file_ids(mentioned)]
            )
        ]
        return [f for f in dict.fromkeys(file_ids) if f in known_files]

    def _message_role(self, row) -> str:
        role = row["role"] if row["role"] in _ROLES else Role.USER
        if role != row["role"]:
            self.result.problem(
                "unknown_role",
                f"source message {row['message_id']} has role {row['role']!r}; stored as user",
            )
        return role

    @staticmethod
    def _insert_messages(conversation: Conversation, prepared: list[_NewMessage]) -> list[int]:
        """Insert the messages; their ids, in order (reserved first where the database can)."""
        ids = bulk.allocate_ids(Message, len(prepared))
        columns = MESSAGE_COLUMNS
        message_rows = [
            (
                conversation.pk,
                m.seq,
                m.role,
                m.content,
                m.tokens,
                m.created_at,
                f"lossless-claw:{m.row['message_id']}",
                m.file_ids,
            )
            for m in prepared
        ]
        if ids is not None:
            columns = ("id", *columns)
            message_rows = [(pk, *r) for pk, r in zip(ids, message_rows, strict=True)]
        bulk.insert_rows(Message, columns, message_rows)
        if ids is not None:
            return ids
        by_seq = dict(
            Message.objects.filter(
                conversation=conversation, seq__range=(prepared[0].seq, prepared[-1].seq)
            ).values_list("seq", "id")
        )
        return [by_seq[m.seq] for m in prepared]

    def _insert_parts(self, ids: list[int], prepared: list[_NewMessage]) -> None:
        used = sorted({name for m in prepared for part in m.parts for name in part.columns})
        part_rows = [
            (pk, self.session_id, part.part_type, part.ordinal, *map(part.columns.get, used))
            for pk, m in zip(ids, prepared, strict=True)
            for part in m.parts
        ]
        if part_rows:
            bulk.insert_rows(MessagePart, (*_PART_KEY, *used), part_rows)

    def _insert_import_records(
        self, conversation: Conversation, ids: list[int], prepared: list[_NewMessage]
    ) -> None:
        """Each message's source id and what lossless-claw kept that we do not model."""
        bulk.insert_rows(
            ImportedMessage,
            ("message_id", "conversation_id", "source_id", "source_token_count", "source"),
            (
                (
                    pk,
                    conversation.pk,
                    str(m.row["message_id"]),
                    m.row["token_count"],
                    {
                        "message_id": m.row["message_id"],
                        "seq": m.row["seq"],
                        "part_ids": self.data.part_ids.get(m.row["message_id"], []),
                        **source_extras(m.row, _MESSAGE_EXTRAS),
                    },
                )
                for pk, m in zip(ids, prepared, strict=True)
            ),
        )

    # -- summaries -------------------------------------------------------------------

    def _ordered_new_summaries(self, state: _State) -> list:
        new = [s for s in self.data.summaries if s["summary_id"] not in state.summaries]

        def depth(s) -> int:
            if s["depth"] is not None:
                return int(s["depth"])
            return 0 if s["kind"] == SummaryKind.LEAF else 1

        # Sources before the summaries above them: by depth, then time.
        return sorted(new, key=lambda s: (depth(s), str(s["created_at"] or ""), s["summary_id"]))

    def _plan_summaries(self, state: _State) -> list[tuple]:
        """(source row, message ids, parent ids, depth) of the summaries to write; reports
        the edges that cannot be linked and the summaries left without any source."""
        planned = []
        available = set(state.summaries)
        depths = {sid: s.depth for sid, s in state.summaries.items()}
        for row in self._ordered_new_summaries(state):
            sid = row["summary_id"]
            message_ids = self._linked_messages(state, sid)
            parent_ids = self._linked_parents(sid, available)
            problem = _summary_problem(sid, row["kind"], message_ids, parent_ids)
            if problem:
                self.result.problem(
                    "summary_not_imported", problem + "; not imported", summary_id=sid
                )
                continue
            depth = self._checked_depth(row, parent_ids, depths)
            available.add(sid)
            self.planned_summaries.add(sid)
            depths[sid] = depth
            planned.append((row, message_ids, parent_ids, depth))
        self.result.counts["summaries"] = len(planned)
        self.result.counts["summary_messages"] = sum(len(p[1]) for p in planned)
        self.result.counts["summary_parents"] = sum(len(p[2]) for p in planned)
        return planned

    def _linked_messages(self, state: _State, sid: str) -> list[int]:
        """Our ids of the summary's source messages; an edge to a missing one is reported."""
        message_ids = []
        for message_id in self.data.message_edges.get(sid, []):
            mapped = state.messages.get(str(message_id))
            if mapped is None:
                self.result.problem(
                    "unlinked_message",
                    f"{sid}: source message {message_id} does not exist; edge not linked",
                    summary_id=sid,
                    message_id=message_id,
                )
                continue
            message_ids.append(mapped[0])
        return message_ids

    def _linked_parents(self, sid: str, available: set[str]) -> list[str]:
        """The summary's source summaries that exist (or are planned before it)."""
        parent_ids = []
        for parent_id in self.data.parent_edges.get(sid, []):
            if parent_id not in available:
                self.result.problem(
                    "unlinked_parent",
                    f"{sid}: source summary {parent_id} does not exist (or could not be "
                    "imported); edge not linked",
                    summary_id=sid,
                    parent_summary_id=parent_id,
                )
                continue
            parent_ids.append(parent_id)
        return parent_ids

    def _checked_depth(self, row, parent_ids: list[str], depths: dict[str, int]) -> int:
        """The depth its sources give it; a source depth that disagrees is reported."""
        depth = 0 if row["kind"] == SummaryKind.LEAF else 1 + max(depths[p] for p in parent_ids)
        if row["depth"] is not None and int(row["depth"]) != depth:
            self.result.problem(
                "depth_recomputed",
                f"{row['summary_id']}: source depth {row['depth']} does not match its sources; "
                f"stored with depth {depth}",
                summary_id=row["summary_id"],
            )
        return depth

    def _write_summaries(self, state: _State) -> None:
        planned = self._plan_summaries(state)
        if not planned:
            return
        conversation = state.conversation
        _refuse_taken_summary_ids(conversation, [p[0]["summary_id"] for p in planned])
        state.secret_policy = state.secret_policy or policy_for(conversation.pk)
        known_files = set(state.files.values())
        by_id = dict(state.summaries)
        messages = {pk: (tokens, at) for pk, tokens, at in state.messages.values()}
        rows, extras, message_edges, parent_edges = [], [], [], []
        for row, message_ids, parent_ids, depth in planned:
            sid = row["summary_id"]
            summary = self._summary_row(state, row, message_ids, parent_ids, depth, by_id, messages)
            summary.file_ids = self._summary_file_ids(state, row, known_files)
            by_id[sid] = summary
            rows.append(summary)
            extras.append(
                ImportedSummary(
                    summary_id=sid,
                    source_token_count=row["token_count"],
                    source={"depth": row["depth"], **source_extras(row, _SUMMARY_EXTRAS)},
                )
            )
            message_edges.extend((sid, m, conversation.pk, i) for i, m in enumerate(message_ids))
            parent_edges.extend((sid, p, conversation.pk, i) for i, p in enumerate(parent_ids))
        _insert_summaries(rows, extras, message_edges, parent_edges)
        state.summaries.update({s.id: s for s in rows})

    def _summary_row(
        self,
        state: _State,
        row,
        message_ids: list[int],
        parent_ids: list[str],
        depth: int,
        by_id: dict[str, Summary],
        messages: dict[int, tuple[int, object]],
    ) -> Summary:
        """The summary with its span and counts taken from its sources (messages, as
        `messages` {id: (tokens, time)} gives them, or summaries), its text remapped."""
        content = self._remap_files(state, clean_text(str(row["content"] or "")))
        content = mask_text(content, state.secret_policy)
        if message_ids:
            times = [messages[m][1] for m in message_ids]
            source_tokens = sum(messages[m][0] for m in message_ids)
            descendants, below_tokens = 0, source_tokens
        else:
            parents = [by_id[p] for p in parent_ids]
            times = [t for p in parents for t in (p.earliest_at, p.latest_at)]
            source_tokens = sum(p.token_count for p in parents)
            descendants = sum(p.descendant_count + 1 for p in parents)
            below_tokens = sum(p.descendant_token_count for p in parents)
        earliest = parse_time(row["earliest_at"]) or min(times)
        latest = parse_time(row["latest_at"]) or max(times)
        if earliest > latest:
            earliest, latest = latest, earliest
        return Summary(
            id=row["summary_id"],
            conversation=state.conversation,
            kind=row["kind"],
            depth=depth,
            level=SummaryLevel.FALLBACK if _TRUNCATION_MARK in content else SummaryLevel.NORMAL,
            content=content,
            token_count=estimate(content),
            earliest_at=earliest,
            latest_at=latest,
            descendant_count=descendants,
            descendant_token_count=below_tokens,
            source_token_count=source_tokens,
            model=str(row["model"] or "")[:255],
            file_ids=[],
            created_at=parse_time(row["created_at"]) or self.now,
        )

    def _summary_file_ids(self, state: _State, row, known_files: set[str]) -> list[str]:
        """Our ids of the files the summary names; an id naming no file is reported."""
        file_ids = []
        for file_id in _json_list(row["file_ids"]):
            mapped = state.files.get(file_id, file_id)
            if mapped in known_files:
                file_ids.append(mapped)
            else:
                self.result.problem(
                    "unknown_file_id",
                    f"{row['summary_id']}: file id {file_id} names no large file of the "
                    "conversation; left out of the summary's file ids",
                    summary_id=row["summary_id"],
                )
        return list(dict.fromkeys(file_ids))

    # -- active context --------------------------------------------------------------

    def _signature(self) -> str:
        text = "\n".join(
            f"{c['item_type']}:{c['message_id'] or c['summary_id']}" for c in self.data.context
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def _plan_context(self, state: _State) -> list[tuple[str, object, int]] | None:
        """The mapped context, or None when the source's is unchanged since the last import."""
        record = (
            ImportedConversation.objects.filter(conversation=state.conversation).first()
            if state.conversation
            else None
        )
        if record is not None and record.context_signature == self._signature():
            return None
        items = []
        for item in self.data.context:
            if item["item_type"] == ItemType.MESSAGE:
                mapped = state.messages.get(str(item["message_id"]))
                if mapped is None:
                    self.result.problem(
                        "unlinked_context_item",
                        f"context item {item['ordinal']}: message {item['message_id']} was not "
                        "imported; left out of the context",
                    )
                    continue
                items.append((ItemType.MESSAGE, mapped[0], mapped[1]))
            else:
                summary = state.summaries.get(item["summary_id"])
                if summary is None and item["summary_id"] not in self.planned_summaries:
                    self.result.problem(
                        "unlinked_context_item",
                        f"context item {item['ordinal']}: summary {item['summary_id']} was not "
                        "imported; left out of the context",
                    )
                    continue
                items.append(
                    (ItemType.SUMMARY, item["summary_id"], summary.token_count if summary else 0)
                )
        self.result.counts["context_items"] = len(items)
        return items

    def _write_context(self, state: _State) -> None:
        items = self._plan_context(state)
        if items is None:
            return
        conversation = state.conversation
        ContextItem.objects.filter(conversation=conversation).delete()
        bulk.insert_rows(
            ContextItem,
            (
                "conversation_id",
                "ordinal",
                "item_type",
                "message_id",
                "summary_id",
                "token_count",
                "created_at",
            ),
            (
                (
                    conversation.pk,
                    ordinal,
                    item_type,
                    ref if item_type == ItemType.MESSAGE else None,
                    ref if item_type == ItemType.SUMMARY else None,
                    tokens,
                    self.now,
                )
                for ordinal, (item_type, ref, tokens) in enumerate(items, start=1)
            ),
        )
        Conversation.objects.filter(pk=conversation.pk).update(
            last_context_ordinal=len(items), updated_at=self.now
        )
        ImportedConversation.objects.filter(conversation=conversation).update(
            context_signature=self._signature(), imported_at=self.now
        )


def _json_list(raw) -> list[str]:
    value = json_value(raw) if raw is not None else []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def import_lossless_claw(
    *,
    path: str | Path,
    owner,
    files_dir: str | Path | None = None,
    dry_run: bool = False,
    trust_paths: bool = True,
    report: ImportReport,
    advance: Callable[[int], None] | None = None,
    set_total: Callable[[int], None] | None = None,
) -> ImportReport:
    source = Source(path)
    try:
        report.notes["schema"] = {
            "tables": sorted(source.schema.columns),
            "migration_steps": list(source.schema.migration_steps),
        }
        report.notes["source_counts"] = source.table_counts()
        if set_total is not None:
            set_total(report.notes["source_counts"]["messages"])
        for row in source.conversations():
            session_id = str(row["session_id"] or "")
            result = ConversationResult(session_id=session_id)
            result.source_counts = source.table_counts(row["conversation_id"])
            report.conversations.append(result)
            if not session_id or len(session_id) > 255:
                result.failed = "the source session_id is empty or longer than 255 characters"
                continue
            data = _read_source(source, row)
            job = ConversationImport(
                source=source,
                data=data,
                owner=owner,
                files_dir=Path(files_dir).resolve() if files_dir else None,
                result=result,
                trust_paths=trust_paths,
            )
            try:
                job.dry_run() if dry_run else job.run()
            except _Abort as abort:
                _failed(result, abort.message, abort.code, **abort.extra)
            except (DatabaseError, IntegrityError) as error:
                logger.exception("lossless-claw import of %s failed", session_id)
                _failed(result, f"the database refused a row: {error}", "database_error")
            if advance is not None:
                advance(len(data.messages))
    finally:
        source.close()
    return report


def _failed(result: ConversationResult, message: str, code: str, **extra) -> None:
    """Nothing of this conversation was written: say so, and zero its counts."""
    result.failed = message
    result.problem(code, message, **extra)
    result.counts = dict.fromkeys(result.counts, 0)
    result.created = False
