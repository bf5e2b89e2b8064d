"""Full-fidelity export archives of a conversation or a turn session (SRD 14.3).

A zip file, documented in docs/security.md:

    manifest.json                  format, version, target, who, when, and per entry its
                                   row count or byte size and SHA-256
    tables/<app>.<Model>.jsonl     every row that belongs to the target, one JSON object per
                                   line with the database columns (foreign keys as `<name>_id`),
                                   in primary-key order; bytes as {"$base64": "..."}
    transcripts/<conversation id>.jsonl
                                   the messages in the importers' JSONL format (re-importable
                                   with `manage.py lcm_import --format jsonl`)
    files/<storage key>            the bytes of each large file, decrypted
    streams/<name>.jsonl           stream journals and turn event logs, decrypted

Which rows: the same walk as hard delete (`security.hard_delete.collect`): the target's
conversations and session, then every row that refers to them, transitively. So the
archive holds exactly what a hard delete would remove.

The archive is streamed as it is built (`archive_chunks`): which rows, files and journals
it holds is decided first, in one short transaction (`archive_plan`); then each table is
read in batches and written, compressed, straight to the client, and manifest.json comes
last. No request waits for the whole archive, and no transaction stays open while bytes
go out. Canonical rows are immutable or append-only, so reading them in batches gives the
planned rows as they were; a context item that compaction replaces meanwhile is left out
(the manifest counts what was written).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from conversations.models import Conversation
from core import crypto
from importers.exporters import export_jsonl
from largefiles.models import LargeFile
from largefiles.store import file_storage
from security.hard_delete import _batches, collect, stream_paths
from turns import journal_store

FORMAT = "lcm-archive"
VERSION = 1


class _Encoder(DjangoJSONEncoder):
    def default(self, o):
        if isinstance(o, bytes | memoryview):
            return {"$base64": base64.b64encode(bytes(o)).decode()}
        return super().default(o)


def _row(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in instance._meta.concrete_fields}


def _row_lines(model, ids: set) -> Iterator[bytes]:
    """The rows of `model` with these ids as JSON lines, in primary-key order, one batch
    (one short query) at a time. A row gone since the plan (a context item compaction
    replaced) is simply not there."""
    for batch in _batches(sorted(ids, key=str)):
        lines = [
            json.dumps(_row(instance), cls=_Encoder, ensure_ascii=False) + "\n"
            for instance in model._base_manager.filter(pk__in=batch).order_by("pk")
        ]
        yield "".join(lines).encode()


class _Sink(io.RawIOBase):
    """Where zipfile writes: bytes wait here until the stream takes them. Not seekable,
    so zipfile writes each entry's sizes after its data (a data descriptor)."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._position = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self._chunks.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def drain(self) -> bytes:
        data, self._chunks = b"".join(self._chunks), []
        return data


@dataclass
class ArchivePlan:
    """What an archive will hold, decided in one short transaction before any byte is
    written: the rows (by id), the conversations, the files and the stream journals."""

    conversation_ids: set[int]
    session_ids: set[str]
    target: tuple[str, str]
    collected: dict = field(default_factory=dict)  # model -> ids
    file_ids: list[int] = field(default_factory=list)
    stream_paths: list = field(default_factory=list)

    def counts(self) -> dict:
        return {
            "rows": {m._meta.label: len(ids) for m, ids in self.collected.items()},
            "files": len(self.file_ids),
            "streams": len(self.stream_paths),
        }


def archive_plan(
    *, conversation_ids: set[int], session_ids: set[str], target: tuple[str, str]
) -> ArchivePlan:
    with transaction.atomic():
        collected = collect(conversation_ids=conversation_ids, session_ids=session_ids)
    return ArchivePlan(
        conversation_ids=set(conversation_ids),
        session_ids=set(session_ids),
        target=target,
        collected=collected,
        file_ids=sorted(collected.get(LargeFile, ())),
        stream_paths=list(stream_paths(collected)),
    )


def archive_chunks(plan: ArchivePlan, *, actor, manifest: dict | None = None) -> Iterator[bytes]:
    """The zip archive of `plan`, as it is built: each table in batches, each transcript,
    file and journal in turn, and manifest.json (counts and SHA-256 of every entry) last.
    Nothing is held between chunks (no transaction, no whole archive in memory), so a
    caller can send each chunk as it comes. `manifest`, if given, is filled in."""
    manifest = manifest if manifest is not None else {}
    manifest.update(_manifest_head(plan, actor))
    out = _ZipOut()
    yield from _write_tables(out, plan, manifest)
    yield from _write_transcripts(out, plan, manifest)
    yield from _write_files(out, plan, manifest)
    yield from _write_streams(out, plan, manifest)
    yield out.close(manifest)


def _manifest_head(plan: ArchivePlan, actor) -> dict:
    """The manifest before any entry: what was exported, by whom, when."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.now(UTC).isoformat(),
        "exported_by": actor.get_username() if actor is not None else None,
        "target": {"kind": plan.target[0], "id": plan.target[1]},
        "conversation_ids": sorted(plan.conversation_ids),
        "session_ids": sorted(plan.session_ids),
        "tables": {},
        "transcripts": {},
        "files": [],
        "streams": [],
    }


class _ZipOut:
    """A zip archive written to a `_Sink`: each entry yields its compressed bytes as
    they come."""

    def __init__(self) -> None:
        self.sink = _Sink()
        self.archive = zipfile.ZipFile(self.sink, "w", compression=zipfile.ZIP_DEFLATED)

    def write(self, name: str, pieces, totals: dict) -> Iterator[bytes]:
        """Write one entry from `pieces`, yielding compressed bytes as they come; its
        size and SHA-256 go into `totals`."""
        digest, size = hashlib.sha256(), 0
        with self.archive.open(name, "w", force_zip64=True) as handle:
            for piece in pieces:
                handle.write(piece)
                digest.update(piece)
                size += len(piece)
                if chunk := self.sink.drain():
                    yield chunk
        totals.update(bytes=size, sha256=digest.hexdigest())

    def close(self, manifest: dict) -> bytes:
        """manifest.json, the central directory: the archive's last bytes."""
        self.archive.writestr("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
        self.archive.close()
        return self.sink.drain()


def _write_tables(out: _ZipOut, plan: ArchivePlan, manifest: dict) -> Iterator[bytes]:
    for model in sorted(plan.collected, key=lambda m: m._meta.label):
        name = f"tables/{model._meta.label}.jsonl"
        lines, totals = _counted(_row_lines(model, plan.collected[model])), {}
        yield from out.write(name, lines, totals)
        manifest["tables"][model._meta.label] = {
            "file": name,
            "rows": lines.count,
            "sha256": totals["sha256"],
        }


def _write_transcripts(out: _ZipOut, plan: ArchivePlan, manifest: dict) -> Iterator[bytes]:
    for conversation in Conversation.objects.filter(pk__in=plan.conversation_ids).order_by("pk"):
        name = f"transcripts/{conversation.pk}.jsonl"
        yield from out.write(name, (line.encode() for line in export_jsonl(conversation)), {})
        manifest["transcripts"][str(conversation.pk)] = name


def _write_files(out: _ZipOut, plan: ArchivePlan, manifest: dict) -> Iterator[bytes]:
    storage = file_storage()
    for large_file in LargeFile.objects.filter(pk__in=plan.file_ids).order_by("pk"):
        name = f"files/{large_file.storage_key}"
        totals = {}
        yield from out.write(name, _file_pieces(storage, large_file.storage_key), totals)
        manifest["files"].append({"file_id": large_file.pk, "path": name, **totals})


def _write_streams(out: _ZipOut, plan: ArchivePlan, manifest: dict) -> Iterator[bytes]:
    for path in plan.stream_paths:
        if not journal_store.exists(path):  # local, or published to shared storage
            continue
        name = f"streams/{path.name}"
        totals = {}
        yield from out.write(name, _journal_lines(path), totals)
        manifest["streams"].append({"path": name, **totals})


class _counted:
    """Row lines, counting the rows that went by."""

    def __init__(self, batches: Iterator[bytes]) -> None:
        self._batches = batches
        self.count = 0

    def __iter__(self):
        for batch in self._batches:
            self.count += batch.count(b"\n")
            yield batch


def _file_pieces(storage, key: str, size: int = 1 << 20) -> Iterator[bytes]:
    with storage.open(key, "rb") as handle:
        while piece := handle.read(size):
            yield piece


def _journal_lines(path) -> Iterator[bytes]:
    for raw in journal_store.read_bytes(path).split(b"\n"):
        try:
            clear = crypto.decrypt_line(raw)
        except crypto.DecryptionError:
            continue  # a torn tail, as every reader skips it
        if clear:
            yield clear + b"\n"
