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
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import zipfile
from datetime import UTC, datetime

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from conversations.models import Conversation
from core import crypto
from importers.exporters import export_jsonl
from largefiles.models import LargeFile
from largefiles.store import file_storage
from security.hard_delete import _batches, _stream_paths, collect
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


def _dump_rows(model, ids: set) -> bytes:
    lines = []
    for batch in _batches(sorted(ids, key=str)):
        for instance in model._base_manager.filter(pk__in=batch).order_by("pk"):
            lines.append(json.dumps(_row(instance), cls=_Encoder, ensure_ascii=False))
    return "".join(line + "\n" for line in lines).encode()


def build_archive(
    *, conversation_ids: set[int], session_ids: set[str], target: tuple[str, str], actor
) -> tuple[bytes, dict]:
    """(zip bytes, manifest). Reads in one transaction, so the archive is one snapshot
    on PostgreSQL (REPEATABLE READ is not needed: rows are immutable or append-only)."""
    entries: dict[str, bytes] = {}
    manifest: dict = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": datetime.now(UTC).isoformat(),
        "exported_by": actor.get_username() if actor is not None else None,
        "target": {"kind": target[0], "id": target[1]},
        "conversation_ids": sorted(conversation_ids),
        "session_ids": sorted(session_ids),
        "tables": {},
        "transcripts": {},
        "files": [],
        "streams": [],
    }
    with transaction.atomic():
        collected = collect(conversation_ids=conversation_ids, session_ids=session_ids)
        for model in sorted(collected, key=lambda m: m._meta.label):
            name = f"tables/{model._meta.label}.jsonl"
            entries[name] = _dump_rows(model, collected[model])
            manifest["tables"][model._meta.label] = {
                "file": name,
                "rows": len(collected[model]),
                "sha256": hashlib.sha256(entries[name]).hexdigest(),
            }
        for conversation in Conversation.objects.filter(pk__in=conversation_ids).order_by("pk"):
            name = f"transcripts/{conversation.pk}.jsonl"
            entries[name] = "".join(export_jsonl(conversation)).encode()
            manifest["transcripts"][str(conversation.pk)] = name
        storage = file_storage()
        for large_file in LargeFile.objects.filter(pk__in=collected.get(LargeFile, ())).order_by(
            "pk"
        ):
            with storage.open(large_file.storage_key, "rb") as handle:
                data = handle.read()
            name = f"files/{large_file.storage_key}"
            entries[name] = data
            manifest["files"].append(
                {
                    "file_id": large_file.pk,
                    "path": name,
                    "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
        for path in _stream_paths(collected):
            if not journal_store.exists(path):  # local, or published to shared storage
                continue
            lines = []
            for raw in journal_store.read_bytes(path).split(b"\n"):
                try:
                    clear = crypto.decrypt_line(raw)
                except crypto.DecryptionError:
                    continue  # a torn tail, as every reader skips it
                if clear:
                    lines.append(clear + b"\n")
            data = b"".join(lines)
            name = f"streams/{path.name}"
            entries[name] = data
            manifest["streams"].append(
                {"path": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False))
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue(), manifest
