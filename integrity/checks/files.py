"""Checks of large files: ids that name no file, and stored objects (missing, corrupt, stray)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from django.db import connection
from django.utils import timezone

from integrity.checks.lineage import MESSAGE, SUMMARY
from integrity.checks.scope import Scope, fetch
from largefiles.models import LargeFile
from largefiles.store import file_storage

LARGE_FILE = "conversations_largefile"

# How each database spreads a JSON array into rows `f(value)`, and tests "not empty".
_JSON_ELEMENTS = {
    "postgresql": (
        "CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(x.file_ids) = "
        "'array' THEN x.file_ids ELSE '[]'::jsonb END) AS f(value)",
        "x.file_ids <> '[]'::jsonb",
    ),
    "sqlite": ("CROSS JOIN json_each(x.file_ids) AS f", "x.file_ids <> '[]'"),
}


def missing_file_ids(scope: Scope) -> list[dict]:
    spread, not_empty = _JSON_ELEMENTS[connection.vendor]
    where, params = scope.where("x.conversation_id")
    pieces = [
        f"""SELECT x.conversation_id, '{kind}' AS owner_kind, CAST(x.id AS TEXT) AS owner_id,
                   f.value AS file_id
            FROM {table} x {spread}
            WHERE {not_empty}{where}
              AND NOT EXISTS (SELECT 1 FROM {LARGE_FILE} lf
                              WHERE lf.id = f.value AND lf.conversation_id = x.conversation_id)"""
        for kind, table in (("message", MESSAGE), ("summary", SUMMARY))
    ]
    return fetch(" UNION ALL ".join(pieces) + " ORDER BY 1, 2, 3, 4", params * 2)


def _files(scope: Scope) -> Iterator[LargeFile]:
    rows = LargeFile.objects.order_by("conversation_id", "id").only(
        "id", "conversation_id", "storage_key", "byte_size", "sha256"
    )
    if scope.conversation_id is not None:
        rows = rows.filter(conversation_id=scope.conversation_id)
    return rows.iterator(chunk_size=500)


def _problem(row: LargeFile, **extra) -> dict:
    return {
        "conversation_id": row.conversation_id,
        "file_id": row.id,
        "storage_key": row.storage_key,
        **extra,
    }


def missing_objects(scope: Scope) -> list[dict]:
    storage = file_storage()
    return [_problem(row) for row in _files(scope) if not storage.exists(row.storage_key)]


def digest(storage, key: str) -> tuple[int, str]:
    """(size, SHA-256 hex) of a stored object, read in chunks."""
    sha, size = hashlib.sha256(), 0
    with storage.open(key, "rb") as handle:
        for chunk in handle.chunks():
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def corrupt_objects(scope: Scope) -> list[dict]:
    storage = file_storage()
    problems = []
    for row in _files(scope):
        if not storage.exists(row.storage_key):
            continue  # reported by file_object_missing
        size, sha = digest(storage, row.storage_key)
        if size != row.byte_size or sha != row.sha256:
            problems.append(
                _problem(
                    row,
                    expected_bytes=row.byte_size,
                    stored_bytes=size,
                    expected_sha256=row.sha256,
                    stored_sha256=sha,
                )
            )
    return problems


def unreferenced_objects(scope: Scope) -> list[dict]:
    """Objects under `<conversation_id>/` that no row names, older than the grace period
    (ingest writes the object before it opens the transaction that inserts the row)."""
    storage = file_storage()
    if scope.conversation_id is not None:
        folders = [str(scope.conversation_id)]
    else:
        folders = sorted(storage.listdir("")[0]) if storage.exists("") else []
    rows = LargeFile.objects.all()
    if scope.conversation_id is not None:
        rows = rows.filter(conversation_id=scope.conversation_id)
    known = set(rows.values_list("storage_key", flat=True))
    cutoff = timezone.now().timestamp() - scope.file_grace_seconds
    problems = []
    for folder in folders:
        if not storage.exists(folder):
            continue
        for name in sorted(storage.listdir(folder)[1]):
            key = f"{folder}/{name}"
            if key in known or storage.get_modified_time(key).timestamp() > cutoff:
                continue
            conversation_id = int(folder) if folder.isdigit() else None
            problems.append({"conversation_id": conversation_id, "storage_key": key})
    return problems
