"""Step "files": the stored bytes of the scope's large files and their explorations.

A file referenced by a wholly redacted message is replaced by the marker; any other file
has the matches in its bytes replaced (as UTF-8 text, else byte-wise). The new bytes are
written as a new object (through the `large_files` storage, so encrypted when a key is
set), the row switches to it (size, SHA-256, lines, tokens) in one transaction, and the
old object is deleted after the commit. The row's exploration summary and file name are
scrubbed the same way. The old object is deleted by the job's "sweep" step, once the
switch is committed. Idempotent: redacted bytes hold nothing to match.
"""

from __future__ import annotations

import hashlib
import posixpath

from django.db import transaction

from conversations.models import Message
from core.token_estimate import estimate
from largefiles.models import LargeFile
from largefiles.store import file_storage, write_object
from security.redaction.context import JobContext


def whole_files(ctx: JobContext) -> set[str]:
    ids: set[str] = set()
    for file_ids in Message.objects.filter(pk__in=ctx.whole_messages).values_list(
        "file_ids", flat=True
    ):
        ids |= set(file_ids or ())
    return ids


def _new_key(old: str, redaction_id: str) -> str:
    stem, extension = posixpath.splitext(old)
    return f"{stem}-{redaction_id}{extension}"


def read_object(key: str) -> bytes:
    with file_storage().open(key, "rb") as handle:
        return handle.read()


def _rewrite(large_file: LargeFile, data: bytes, ctx: JobContext) -> str:
    """Switch the row to a new object holding `data`; the old key, for the sweep step."""
    key = _new_key(large_file.storage_key, ctx.row.pk)
    write_object(key, data)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = None
    old_key = large_file.storage_key
    with transaction.atomic():
        LargeFile.objects.filter(pk=large_file.pk).update(
            storage_key=key,
            byte_size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            line_count=text.count("\n") + (not text.endswith("\n")) if text else 0,
            token_count=estimate(text) if text is not None else large_file.token_count,
        )
    return old_key


def redacted_bytes(large_file: LargeFile, ctx: JobContext, whole: set[str]) -> tuple[bytes, int]:
    """The file's bytes as redacted, and how many matches (0: unchanged)."""
    stored = read_object(large_file.storage_key)
    if large_file.pk in whole:
        return ctx.mark.encode(), int(stored != ctx.mark.encode())
    return ctx.matcher.sub_bytes(stored)


def run(ctx: JobContext) -> dict:
    counts = {"files": 0, "explorations": 0, "superseded": []}
    whole = whole_files(ctx)
    for large_file in LargeFile.objects.filter(conversation_id__in=ctx.row.conversation_ids):
        data, changed = redacted_bytes(large_file, ctx, whole)
        if changed:
            counts["superseded"].append(_rewrite(large_file, data, ctx))
            counts["files"] += 1
        summary, n1 = ctx.matcher.sub(large_file.exploration_summary)
        name, n2 = ctx.matcher.sub(large_file.file_name)
        if large_file.pk in whole and large_file.exploration_summary:
            summary, n1 = ctx.mark, 1
        if n1 or n2:
            LargeFile.objects.filter(pk=large_file.pk).update(
                exploration_summary=summary, file_name=name
            )
            counts["explorations"] += 1
    return counts
