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
from conversations.inputs import PartInput, render_parts_text
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
        conversation = state.conversation
        rows, imported = [], []
        for source_file in self.data.files:
            source_id = source_file["file_id"]
            if source_id in state.files:
                continue
            uri = str(source_file["storage_uri"] or "")
            found = resolve_file(
                uri,
                db_path=self.source.path,
                files_dir=self.files_dir,
                trust_paths=self.trust_paths,
            )
            if found.data is not None:
                sha = hashlib.sha256(found.data).hexdigest()
                if sha in state.file_shas:  # the same bytes are stored already: one file
                    state.files[source_id] = state.file_shas[sha]
                    continue
            else:
                sha = hashlib.sha256(f"missing:{source_id}".encode()).hexdigest()
            file_id = source_id
            if (
                not file_id.startswith("file_")
                or len(file_id) > 32
                or (LargeFile.objects.filter(pk=file_id).exists())
            ):
                file_id = new_file_id()  # the id is taken (another import of this source)
            text = found.data.decode("utf-8", errors="replace") if found.data else ""
            name = str(source_file["file_name"] or "")
            file_type = guess_file_type(text, name=name or None, mime=source_file["mime_type"])
            key = storage_key(
                conversation_id=conversation.pk, file_id=file_id, extension=file_type.extension
            )
            if found.data is not None:
                write_object(key, found.data)
                self.written_objects.append(key)
            else:
                self.result.problem(
                    "file_missing",
                    f"{source_id}: no bytes at {uri} nor under the files directory; the file "
                    "is kept (summary and references) and marked missing",
                    file_id=file_id,
                    storage_uri=uri,
                )
            byte_size = len(found.data) if found.data is not None else source_file["byte_size"]
            rows.append(
                LargeFile(
                    id=file_id,
                    conversation=conversation,
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
            )
            imported.append(
                ImportedFile(
                    large_file_id=file_id,
                    source_id=source_id,
                    source_uri=uri,
                    missing=found.data is None,
                )
            )
            state.files[source_id] = file_id
            state.file_shas[sha] = file_id
        LargeFile.objects.bulk_create(rows)
        ImportedFile.objects.bulk_create(imported)
        self.result.counts["large_files"] = len(rows)

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
        seq = conversation.last_seq
        prepared = []
        for row in new:
            parts = self.data.parts.get(row["message_id"], [])
            if remap:
                parts = [
                    PartInput(
                        p.part_type,
                        p.ordinal,
                        {
                            k: self._remap_files(state, v) if isinstance(v, str) else v
                            for k, v in p.columns.items()
                        },
                    )
                    for p in parts
                ]
            content = clean_text(str(row["content"] or ""))
            if remap:
                content = self._remap_files(state, content)
            rendered = render_parts_text(tuple(parts)) if parts else ""
            if parts and not content.strip():
                content = rendered
            tokens = max(estimate(content), estimate(rendered)) if parts else estimate(content)
            mentioned = (
                content
                + "\n"
                + "\n".join(
                    str(p.columns.get(k) or "")
                    for p in parts
                    for k in ("tool_output", "text_content")
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
            file_ids = [f for f in dict.fromkeys(file_ids) if f in known_files]
            role = row["role"] if row["role"] in _ROLES else Role.USER
            if role != row["role"]:
                self.result.problem(
                    "unknown_role",
                    f"source message {row['message_id']} has role {row['role']!r}; stored as user",
                )
            seq += 1
            created_at = parse_time(row["created_at"]) or self.now
            prepared.append((row, parts, content, tokens, file_ids, role, seq, created_at))
        ids = bulk.allocate_ids(Message, len(prepared))
        columns = (
            "conversation_id",
            "seq",
            "role",
            "content",
            "token_count",
            "created_at",
            "external_id",
            "file_ids",
        )
        message_rows = [
            (
                conversation.pk,
                seq,
                role,
                content,
                tokens,
                created_at,
                f"lossless-claw:{row['message_id']}",
                file_ids,
            )
            for row, _, content, tokens, file_ids, role, seq, created_at in prepared
        ]
        if ids is not None:
            columns = ("id", *columns)
            message_rows = [(pk, *r) for pk, r in zip(ids, message_rows, strict=True)]
        bulk.insert_rows(Message, columns, message_rows)
        if ids is None:
            by_seq = dict(
                Message.objects.filter(
                    conversation=conversation, seq__range=(prepared[0][6], prepared[-1][6])
                ).values_list("seq", "id")
            )
            ids = [by_seq[p[6]] for p in prepared]
        used = sorted({name for p in prepared for part in p[1] for name in part.columns})
        part_rows = [
            (pk, self.session_id, part.part_type, part.ordinal, *map(part.columns.get, used))
            for pk, p in zip(ids, prepared, strict=True)
            for part in p[1]
        ]
        if part_rows:
            bulk.insert_rows(MessagePart, (*_PART_KEY, *used), part_rows)
        bulk.insert_rows(
            ImportedMessage,
            ("message_id", "conversation_id", "source_id", "source_token_count", "source"),
            (
                (
                    pk,
                    conversation.pk,
                    str(row["message_id"]),
                    row["token_count"],
                    {
                        "message_id": row["message_id"],
                        "seq": row["seq"],
                        "part_ids": self.data.part_ids.get(row["message_id"], []),
                        **source_extras(row, _MESSAGE_EXTRAS),
                    },
                )
                for pk, (row, *_rest) in zip(ids, prepared, strict=True)
            ),
        )
        for pk, (row, _, _, tokens, _, _, _, created_at) in zip(ids, prepared, strict=True):
            state.messages[str(row["message_id"])] = (pk, tokens, created_at)
        Conversation.objects.filter(pk=conversation.pk).update(last_seq=seq, updated_at=self.now)
        conversation.last_seq = seq

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
            kind = row["kind"]
            sources_m = self.data.message_edges.get(sid, [])
            sources_p = self.data.parent_edges.get(sid, [])
            message_ids, parent_ids = [], []
            for message_id in sources_m:
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
            for parent_id in sources_p:
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
            problem = None
            if kind not in SummaryKind.values:
                problem = f"{sid}: unknown kind {kind!r}"
            elif message_ids and parent_ids:
                problem = f"{sid}: links both messages and summaries"
            elif kind == SummaryKind.LEAF and not message_ids:
                problem = f"{sid}: a leaf summary with no source message that could be linked"
            elif kind == SummaryKind.CONDENSED and not parent_ids:
                problem = f"{sid}: a condensed summary with no source summary that could be linked"
            elif not sid.startswith("sum_") or len(sid) > 32:
                problem = f"{sid}: not a summary id of the form sum_<hex>"
            if problem:
                self.result.problem(
                    "summary_not_imported", problem + "; not imported", summary_id=sid
                )
                continue
            depth = 0 if kind == SummaryKind.LEAF else 1 + max(depths[p] for p in parent_ids)
            if row["depth"] is not None and int(row["depth"]) != depth:
                self.result.problem(
                    "depth_recomputed",
                    f"{sid}: source depth {row['depth']} does not match its sources; "
                    f"stored with depth {depth}",
                    summary_id=sid,
                )
            available.add(sid)
            self.planned_summaries.add(sid)
            depths[sid] = depth
            planned.append((row, message_ids, parent_ids, depth))
        self.result.counts["summaries"] = len(planned)
        self.result.counts["summary_messages"] = sum(len(p[1]) for p in planned)
        self.result.counts["summary_parents"] = sum(len(p[2]) for p in planned)
        return planned

    def _write_summaries(self, state: _State) -> None:
        planned = self._plan_summaries(state)
        if not planned:
            return
        conversation = state.conversation
        ids = [p[0]["summary_id"] for p in planned]
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
        known_files = set(state.files.values())
        by_id = dict(state.summaries)
        message_times = {pk: at for pk, _, at in state.messages.values()}
        message_tokens = {pk: tokens for pk, tokens, _ in state.messages.values()}
        rows, extras, message_edges, parent_edges = [], [], [], []
        for row, message_ids, parent_ids, depth in planned:
            sid = row["summary_id"]
            content = self._remap_files(state, clean_text(str(row["content"] or "")))
            if message_ids:
                times = [message_times[m] for m in message_ids]
                source_tokens = sum(message_tokens[m] for m in message_ids)
                descendants = 0
                below_tokens = source_tokens
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
            file_ids = []
            raw_files = row["file_ids"]
            for file_id in _json_list(raw_files):
                mapped = state.files.get(file_id, file_id)
                if mapped in known_files:
                    file_ids.append(mapped)
                else:
                    self.result.problem(
                        "unknown_file_id",
                        f"{sid}: file id {file_id} names no large file of the conversation; "
                        "left out of the summary's file ids",
                        summary_id=sid,
                    )
            summary = Summary(
                id=sid,
                conversation=conversation,
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
                file_ids=list(dict.fromkeys(file_ids)),
                created_at=parse_time(row["created_at"]) or self.now,
            )
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
        state.summaries.update({s.id: s for s in rows})

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
