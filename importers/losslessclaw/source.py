"""Reading a lossless-claw SQLite database, read-only, as its schema is.

The database is opened with a `file:...?mode=ro` URI (plus `immutable=1` when no
write-ahead log is pending), so nothing, not even a -shm or -wal file, is written beside it. The columns each table really has are read first: the importer
needs the REQUIRED ones and uses the OPTIONAL ones only when they exist, so databases
written by older versions (before a column was added) import too.

Supported schema: lossless-claw 0.15.x, and older databases with the same core tables
that lack some optional columns (see docs/import-export.md, "Moving from lossless-claw").
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from core.api.errors import InvalidInput

REQUIRED: dict[str, tuple[str, ...]] = {
    "conversations": ("conversation_id", "session_id"),
    "messages": ("message_id", "conversation_id", "seq", "role", "content"),
    "message_parts": ("part_id", "message_id", "part_type", "ordinal"),
    "summaries": ("summary_id", "conversation_id", "kind", "content"),
    "summary_messages": ("summary_id", "message_id", "ordinal"),
    "summary_parents": ("summary_id", "parent_summary_id", "ordinal"),
    "context_items": ("conversation_id", "ordinal", "item_type", "message_id", "summary_id"),
}
OPTIONAL: dict[str, tuple[str, ...]] = {
    "conversations": ("title", "created_at", "session_key", "active", "archived_at"),
    "messages": (
        "token_count",
        "created_at",
        "identity_hash",
        "transcript_entry_id",
        "large_content",
        "stable_event_key",
        "openclaw_sender_metadata",
    ),
    "message_parts": (
        "text_content",
        "is_ignored",
        "is_synthetic",
        "tool_call_id",
        "tool_name",
        "tool_status",
        "tool_input",
        "tool_output",
        "tool_error",
        "tool_title",
        "patch_hash",
        "patch_files",
        "file_mime",
        "file_name",
        "file_url",
        "subtask_prompt",
        "subtask_desc",
        "subtask_agent",
        "step_reason",
        "step_cost",
        "step_tokens_in",
        "step_tokens_out",
        "snapshot_hash",
        "compaction_auto",
        "metadata",
    ),
    "summaries": (
        "depth",
        "token_count",
        "earliest_at",
        "latest_at",
        "descendant_count",
        "descendant_token_count",
        "source_message_token_count",
        "created_at",
        "file_ids",
        "model",
    ),
    "large_files": (
        "file_name",
        "mime_type",
        "byte_size",
        "line_count",
        "exploration_summary",
        "created_at",
    ),
}
LARGE_FILES_REQUIRED = ("file_id", "conversation_id", "storage_uri")
COUNTED_TABLES = (
    "conversations",
    "messages",
    "message_parts",
    "summaries",
    "summary_messages",
    "summary_parents",
    "context_items",
    "large_files",
)


class SourceError(InvalidInput):
    """The file is not a lossless-claw database this importer can read."""

    code = "unsupported_source"


@dataclass(frozen=True)
class Schema:
    columns: dict[str, frozenset[str]]
    migration_steps: tuple[str, ...]

    def has(self, table: str, column: str) -> bool:
        return column in self.columns.get(table, ())

    def select(self, table: str, alias: str = "") -> str:
        """The column list to read: required plus the optional ones present (NULL if not)."""
        prefix = f"{alias}." if alias else ""
        wanted = REQUIRED.get(table, LARGE_FILES_REQUIRED) + OPTIONAL.get(table, ())
        return ", ".join(f"{prefix}{c}" if self.has(table, c) else f"NULL AS {c}" for c in wanted)


def connect_read_only(path: str | Path) -> sqlite3.Connection:
    path = Path(path).resolve()
    if not path.is_file():
        raise SourceError(f"{path} is not a file", extra={"path": str(path)})
    # With no pending write-ahead log, `immutable=1` reads without creating the -shm/-wal
    # files SQLite otherwise makes for a WAL database; a live database (a non-empty -wal)
    # is read with plain mode=ro, so the log's committed pages are seen.
    wal = path.with_name(path.name + "-wal")
    live = wal.exists() and wal.stat().st_size > 0
    flags = "mode=ro" if live else "mode=ro&immutable=1"
    connection = sqlite3.connect(f"file:{quote(str(path))}?{flags}", uri=True)
    connection.row_factory = sqlite3.Row
    # The file may come from anyone (an upload): run nothing its schema defines.
    connection.execute("PRAGMA trusted_schema = OFF")
    connection.execute("PRAGMA query_only = ON")
    return connection


def read_schema(connection: sqlite3.Connection) -> Schema:
    try:
        tables = {
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    except sqlite3.DatabaseError as error:
        raise SourceError(f"not an SQLite database: {error}") from None
    columns: dict[str, frozenset[str]] = {}
    for table in (*REQUIRED, "large_files"):
        if table not in tables:
            if table == "large_files":
                continue  # databases from before large-file support have none
            raise SourceError(
                f"not a lossless-claw database: table {table!r} is missing",
                extra={"table": table},
            )
        columns[table] = frozenset(
            row[1] for row in connection.execute(f"PRAGMA table_info({table})")
        )
    for table, needed in REQUIRED.items():
        absent = [c for c in needed if c not in columns[table]]
        if absent:
            raise SourceError(
                f"unsupported lossless-claw schema: {table} has no column {absent[0]!r}",
                extra={"table": table, "columns": absent},
            )
    if "large_files" in columns:
        absent = [c for c in LARGE_FILES_REQUIRED if c not in columns["large_files"]]
        if absent:
            raise SourceError(
                f"unsupported lossless-claw schema: large_files has no column {absent[0]!r}",
                extra={"table": "large_files", "columns": absent},
            )
    steps: tuple[str, ...] = ()
    if "lcm_migration_state" in tables:
        steps = tuple(
            f"{r[0]}@{r[1]}"
            for r in connection.execute(
                "SELECT step_name, algorithm_version FROM lcm_migration_state ORDER BY 1, 2"
            )
        )
    return Schema(columns=columns, migration_steps=steps)


def json_value(raw):
    """A TEXT column holding JSON: its value, or the text itself when it is not JSON."""
    if raw is None or not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


class Source:
    """One open source database and its schema."""

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        self.connection = connect_read_only(self.path)
        self.schema = read_schema(self.connection)

    def close(self) -> None:
        self.connection.close()

    def table_counts(self, conversation_id: int | None = None) -> dict[str, int]:
        counts = {}
        for table in COUNTED_TABLES:
            if table not in self.schema.columns:
                counts[table] = 0
                continue
            counts[table] = self._count(table, conversation_id)
        return counts

    def _count(self, table: str, conversation_id: int | None) -> int:
        if conversation_id is None:
            sql, params = f"SELECT COUNT(*) FROM {table}", []
        elif table == "message_parts":
            sql = (
                "SELECT COUNT(*) FROM message_parts p JOIN messages m"
                " ON m.message_id = p.message_id WHERE m.conversation_id = ?"
            )
            params = [conversation_id]
        elif table in ("summary_messages", "summary_parents"):
            sql = (
                f"SELECT COUNT(*) FROM {table} e JOIN summaries s ON s.summary_id = e.summary_id"
                " WHERE s.conversation_id = ?"
            )
            params = [conversation_id]
        else:
            sql, params = (
                f"SELECT COUNT(*) FROM {table} WHERE conversation_id = ?",
                [conversation_id],
            )
        return self.connection.execute(sql, params).fetchone()[0]

    def conversations(self) -> list[sqlite3.Row]:
        return self.connection.execute(
            f"SELECT {self.schema.select('conversations')} FROM conversations"
            " ORDER BY conversation_id"
        ).fetchall()

    def messages(self, conversation_id: int) -> list[sqlite3.Row]:
        return self.connection.execute(
            f"SELECT {self.schema.select('messages')} FROM messages"
            " WHERE conversation_id = ? ORDER BY seq, message_id",
            [conversation_id],
        ).fetchall()

    def parts(self, conversation_id: int) -> Iterator[sqlite3.Row]:
        """Every part of the conversation, by message then ordinal."""
        return self.connection.execute(
            f"SELECT {self.schema.select('message_parts', 'p')} FROM message_parts p"
            " JOIN messages m ON m.message_id = p.message_id"
            " WHERE m.conversation_id = ? ORDER BY p.message_id, p.ordinal",
            [conversation_id],
        )

    def summaries(self, conversation_id: int) -> list[sqlite3.Row]:
        return self.connection.execute(
            f"SELECT {self.schema.select('summaries')} FROM summaries"
            " WHERE conversation_id = ? ORDER BY created_at, summary_id",
            [conversation_id],
        ).fetchall()

    def summary_messages(self, conversation_id: int) -> list[sqlite3.Row]:
        return self.connection.execute(
            "SELECT e.summary_id, e.message_id, e.ordinal FROM summary_messages e"
            " JOIN summaries s ON s.summary_id = e.summary_id WHERE s.conversation_id = ?"
            " ORDER BY e.summary_id, e.ordinal",
            [conversation_id],
        ).fetchall()

    def summary_parents(self, conversation_id: int) -> list[sqlite3.Row]:
        return self.connection.execute(
            "SELECT e.summary_id, e.parent_summary_id, e.ordinal FROM summary_parents e"
            " JOIN summaries s ON s.summary_id = e.summary_id WHERE s.conversation_id = ?"
            " ORDER BY e.summary_id, e.ordinal",
            [conversation_id],
        ).fetchall()

    def context_items(self, conversation_id: int) -> list[sqlite3.Row]:
        return self.connection.execute(
            "SELECT ordinal, item_type, message_id, summary_id FROM context_items"
            " WHERE conversation_id = ? ORDER BY ordinal",
            [conversation_id],
        ).fetchall()

    def large_files(self, conversation_id: int) -> list[sqlite3.Row]:
        if "large_files" not in self.schema.columns:
            return []
        return self.connection.execute(
            f"SELECT {self.schema.select('large_files')} FROM large_files"
            " WHERE conversation_id = ? ORDER BY created_at, file_id",
            [conversation_id],
        ).fetchall()
