"""Proof (`lcm_redact verify`): every place the product stores data is scanned for the
removed strings and their common encodings, and each occurrence is reported.

Forms looked for, each case-folded: the string itself, JSON-escaped, and base64 at each
of the three byte alignments (the characters that depend on the string alone), so a
secret inside a base64-encoded file or JSON payload is found too.

Places:
- every table of the database (not only the app's models: FTS shadow tables and gram
  tables too), every text and JSON column;
- the search indexes: SQLite FTS5 tables by phrase query, PostgreSQL tsvector columns by
  `phraseto_tsquery`;
- the search indexes' storage below their live entries: the terms every FTS5 leaf page
  holds (deleted rows' too, until a merge), and the GIN entries of old row versions on
  PostgreSQL (security.redaction.search_storage);
- the SQLite database file and its WAL (freed pages can keep old text: the redaction job
  zeroes them with `secure_delete` and checkpoints the WAL);
- every file under LCM_DATA_DIR (large-file objects and archive segments decrypted and
  decompressed, stream journals and turn event logs line by line, export archives entry
  by entry);
- the stream journal, large-file, archive and export storages when they are buckets.

Found occurrences name the place (table and column, or file) and the row id, never text.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection

from archive import segments
from core import crypto
from security.redaction.search_storage import storage

_NOT_TEXT = re.compile(r"INT|REAL|BOOL|DATE|TIME|DECIMAL|NUMERIC|FLOAT|DOUBLE", re.I)
_LIMIT = 200  # occurrences listed (all are counted)


def forms_of(needle: str) -> list[str]:
    """The string, JSON-escaped, and its base64 at three alignments, case-folded."""
    forms = {needle, json.dumps(needle, ensure_ascii=False)[1:-1], json.dumps(needle)[1:-1]}
    raw = needle.encode()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode()
        start, end = math.ceil(4 * shift / 3), math.floor(4 * (shift + len(raw)) / 3)
        if end - start >= 8:
            forms.add(encoded[start:end])
    return sorted({f.casefold() for f in forms if f})


@dataclass
class Verification:
    strings: int = 0
    places_scanned: dict[str, int] = field(default_factory=dict)
    occurrences: list[dict] = field(default_factory=list)
    count: int = 0

    def found(self, **where) -> None:
        self.count += 1
        if len(self.occurrences) < _LIMIT:
            self.occurrences.append(where)

    def as_dict(self) -> dict:
        return {
            "strings": self.strings,
            "occurrences": self.count,
            "places_scanned": self.places_scanned,
            "found": self.occurrences,
        }


def _tables(cursor) -> list[tuple[str, list[str]]]:
    if connection.vendor == "postgresql":
        cursor.execute(
            """SELECT table_name, column_name FROM information_schema.columns
               WHERE table_schema = current_schema()
                 AND data_type IN ('text', 'character varying', 'json', 'jsonb')
               ORDER BY table_name, ordinal_position"""
        )
        tables: dict[str, list[str]] = {}
        for table, column in cursor.fetchall():
            tables.setdefault(table, []).append(column)
        return list(tables.items())
    cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    out = []
    for name, sql in cursor.fetchall():
        if name.startswith("sqlite_") or "VIRTUAL TABLE" in (sql or "").upper():
            continue
        cursor.execute(f'PRAGMA table_info("{name}")')
        columns = [row[1] for row in cursor.fetchall() if not _NOT_TEXT.search(row[2] or "")]
        out.append((name, columns))
    return out


def _scan_tables(forms: list[str], result: Verification) -> None:
    with connection.cursor() as cursor:
        tables = _tables(cursor)
        for table, columns in tables:
            key = "ctid" if connection.vendor == "postgresql" else "rowid"
            for column in columns:
                text = f'lower(CAST("{column}" AS TEXT))'
                where = " OR ".join([f"{text} LIKE %s ESCAPE '!'"] * len(forms))
                params = [f"%{_escape(f)}%" for f in forms]
                try:
                    cursor.execute(
                        f'SELECT CAST({key} AS TEXT) FROM "{table}" WHERE {where}', params
                    )
                except Exception:  # a table without rowid (WITHOUT ROWID) or odd type
                    continue
                for (row,) in cursor.fetchall():
                    result.found(place="table", table=table, column=column, row=row)
        result.places_scanned["tables"] = len(tables)


def _escape(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


def _scan_search_indexes(needles: list[str], result: Verification) -> None:
    scanned = 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                """SELECT table_name, column_name FROM information_schema.columns
                   WHERE table_schema = current_schema() AND data_type = 'tsvector'"""
            )
            for table, column in cursor.fetchall():
                scanned += 1
                for needle in needles:
                    cursor.execute(
                        f'SELECT CAST(ctid AS TEXT) FROM "{table}" '
                        f"WHERE \"{column}\" @@ phraseto_tsquery('english', %s) "
                        "AND numnode(phraseto_tsquery('english', %s)) > 0",
                        [needle, needle],
                    )
                    for (row,) in cursor.fetchall():
                        result.found(place="search_index", table=table, column=column, row=row)
        else:
            cursor.execute("SELECT name FROM sqlite_master WHERE sql LIKE '%USING fts5%'")
            for (table,) in cursor.fetchall():
                scanned += 1
                for needle in needles:
                    phrase = '"' + needle.replace('"', '""') + '"'
                    try:
                        cursor.execute(
                            f'SELECT rowid FROM "{table}" WHERE "{table}" MATCH %s', [phrase]
                        )
                        rows = cursor.fetchall()
                    except Exception:  # a phrase this tokenizer cannot take
                        continue
                    for (row,) in rows:
                        result.found(place="search_index", table=table, row=str(row))
    result.places_scanned["search_indexes"] = scanned


def _scan_search_storage(needles: list[str], result: Verification) -> None:
    store = storage()
    for remnant in store.remnants(needles):
        result.found(**remnant.as_dict())
    result.places_scanned["search_index_storage"] = len(store.indexes())


def _clear_texts(path: Path, data: bytes) -> list[bytes]:
    """The readable forms of one stored file: itself, decrypted, a segment decompressed,
    a zip's entries inflated, a JSON-lines file line by line decrypted."""
    texts = [data]
    if data.startswith(crypto.MAGIC):
        try:
            data = crypto.decrypt_bytes(data)
            texts.append(data)
        except crypto.DecryptionError:
            return texts
    if data.startswith(segments.MAGIC):
        header, _, compressed = data.partition(b"\n")
        with contextlib.suppress(Exception):  # an unreadable segment is integrity's to report
            texts.append(segments.decompress(compressed, header[len(segments.MAGIC) :].decode()))
    if data.startswith(b"PK\x03\x04"):  # a zip (an export archive): each entry, inflated
        with (
            contextlib.suppress(zipfile.BadZipFile, OSError, EOFError),
            zipfile.ZipFile(io.BytesIO(data)) as archive,
        ):
            texts += [archive.read(name) for name in archive.namelist()]
    if path.suffix == ".jsonl":
        for raw in data.split(b"\n"):
            try:
                texts.append(crypto.decrypt_line(raw))
            except ValueError:
                continue
    return texts


def _stored_files():
    """(name, bytes) of every file the product stores: the data directory (the SQLite
    database and its WAL included), the file-system storages wherever they point, and
    the objects of the storages that are buckets."""
    from django.core.files.storage import FileSystemStorage, storages

    roots = {Path(settings.DATA_DIR).resolve()}
    buckets = []
    for alias in ("large_files", "archive_segments", "stream_journals", "export_archives"):
        # The stored bytes, below an encrypting wrapper: each is decrypted where it can be
        # (`_clear_texts`), and one no configured key opens is still scanned as it is.
        storage = getattr(storages[alias], "inner", storages[alias])
        if isinstance(storage, FileSystemStorage):
            roots.add(Path(storage.location).resolve())
        else:
            buckets.append((alias, storage))
    if connection.vendor == "sqlite":
        database = Path(connection.settings_dict["NAME"])
        for path in (database, Path(f"{database}-wal")):
            if path.is_file() and not any(root in path.resolve().parents for root in roots):
                yield str(path), path.read_bytes()
    seen = set()
    for root in sorted(roots):
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                yield str(path), path.read_bytes()
            except OSError:
                continue
    for alias, storage in buckets:
        yield from _bucket_files(alias, storage, "")


def _bucket_files(alias: str, storage, folder: str):
    try:
        folders, names = storage.listdir(folder)
    except FileNotFoundError:  # a file-system storage nothing was written to yet
        return
    for name in names:
        key = f"{folder}/{name}" if folder else name
        with storage.open(key, "rb") as handle:
            yield f"{alias}:{key}", handle.read()
    for sub in folders:
        yield from _bucket_files(alias, storage, f"{folder}/{sub}" if folder else sub)


def _scan_files(forms: list[str], result: Verification) -> None:
    scanned = 0
    encoded = [f.encode() for f in forms]
    for name, data in _stored_files():
        scanned += 1
        for text in _clear_texts(Path(name), data):
            folded = text.decode(errors="ignore").casefold().encode()
            if any(f in folded for f in encoded):
                result.found(place="file", path=name)
                break
    result.places_scanned["files"] = scanned


def _checkpoint() -> None:
    """Fold the WAL into the database file (outside a transaction only: inside one, the
    transaction's own writes are not on disk yet anyway)."""
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def verify(needles: list[str]) -> Verification:
    """Scan every place for each needle in every form; zero occurrences is the proof."""
    needles = [n for n in dict.fromkeys(needles) if n]
    result = Verification(strings=len(needles))
    if not needles:
        return result
    forms = sorted({f for n in needles for f in forms_of(n)})
    _checkpoint()
    _scan_tables(forms, result)
    _scan_search_indexes(needles, result)
    _scan_search_storage(needles, result)
    _scan_files(forms, result)
    return result
