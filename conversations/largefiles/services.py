"""Storing intercepted files, inside the ingest transaction and its conversation lock.

Order matters for never losing data: the object is written first, then its row is
inserted, then the messages that refer to it, all before the commit. If anything fails
inside the transaction, the objects written by this call are deleted while the lock is
still held (no other writer of the conversation can have started using them). If the
commit itself fails, or the process dies, an object may be left with no row: harmless,
and reported by the integrity check `file_object_unreferenced`.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from conversations.largefiles.intercept import PreparedBatch
from conversations.largefiles.store import delete_objects, storage_key, write_object
from conversations.models import LargeFile

logger = logging.getLogger("lcm.largefiles")


@contextmanager
def large_files_stored(*, conversation_id: int, batch: PreparedBatch, used: set[str]):
    """Store the batch's new files that `used` message ids refer to; on an error inside
    the block, remove the objects written here. Call with the conversation lock held."""
    written: list[str] = []
    try:
        _store(conversation_id, batch, used, written)
        yield
    except BaseException:
        try:
            delete_objects(written)
        except Exception:  # the integrity check reports what could not be removed
            logger.exception("could not remove objects of a failed ingest: %s", written)
        raise


def _store(conversation_id: int, batch: PreparedBatch, used: set[str], written: list[str]):
    new = [f for f in batch.files.values() if not f.existing and f.file_id in used]
    if not new:
        return
    # Under the lock: another writer may have stored the same bytes since we looked.
    winners = dict(
        LargeFile.objects.filter(
            conversation_id=conversation_id, sha256__in=[f.sha256 for f in new]
        ).values_list("sha256", "id")
    )
    rows = []
    for pending in new:
        if pending.sha256 in winners:
            batch.remapped[pending.file_id] = winners[pending.sha256]
            continue
        key = storage_key(
            conversation_id=conversation_id, file_id=pending.file_id, extension=pending.extension
        )
        write_object(key, pending.data)
        written.append(key)
        rows.append(
            LargeFile(
                id=pending.file_id,
                conversation_id=conversation_id,
                file_name=pending.file_name,
                mime_type=pending.mime_type,
                byte_size=len(pending.data),
                line_count=pending.line_count,
                token_count=pending.token_count,
                sha256=pending.sha256,
                storage_key=key,
                exploration_summary=pending.exploration_summary,
                tool_name=pending.tool_name,
            )
        )
    LargeFile.objects.bulk_create(rows)
