"""Storing intercepted files around the ingest transaction.

The objects are written before the transaction opens, with no lock held (the storage may
be a network service); their `LargeFile` rows are inserted inside it, under the
conversation lock, with the messages that refer to them. An object's key holds a fresh
random file id, so nothing can refer to it before its row commits.

When the block ends, every object written here whose row is not stored is deleted: the
files of re-sent messages, the bytes a concurrent writer stored first, and, on an error,
every object whose row is not in the database (looked up, so an error after the commit
never deletes a committed file). If the process dies first, an object may be left with no
row: harmless, and reported by the integrity check `file_object_unreferenced`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from largefiles.intercept import PreparedBatch
from largefiles.models import LargeFile
from largefiles.store import delete_objects, storage_key, write_object

logger = logging.getLogger("lcm.largefiles")


class StagedFiles:
    """The new objects of one batch, written and waiting for their rows."""

    def __init__(self, conversation_id: int, batch: PreparedBatch | None):
        self.conversation_id = conversation_id
        self.batch = batch
        self.written: dict[str, str] = {}  # file id -> storage key
        self.recorded: set[str] = set()  # file ids whose rows were inserted

    def _write(self) -> None:
        if self.batch is None:
            return
        for pending in self.batch.files.values():
            if pending.existing:
                continue
            key = storage_key(
                conversation_id=self.conversation_id,
                file_id=pending.file_id,
                extension=pending.extension,
            )
            write_object(key, pending.data)
            self.written[pending.file_id] = key

    def record(self, *, used: set[str]) -> None:
        """Insert the rows of the new files that `used` message ids refer to. Call inside
        the ingest transaction, with the conversation lock held."""
        if self.batch is None:
            return
        new = [
            f for f in self.batch.files.values() if f.file_id in self.written and f.file_id in used
        ]
        if not new:
            return
        # Under the lock: another writer may have stored the same bytes since we looked.
        winners = dict(
            LargeFile.objects.filter(
                conversation_id=self.conversation_id, sha256__in=[f.sha256 for f in new]
            ).values_list("sha256", "id")
        )
        rows = []
        for pending in new:
            if pending.sha256 in winners:
                self.batch.remapped[pending.file_id] = winners[pending.sha256]
                continue
            rows.append(
                LargeFile(
                    id=pending.file_id,
                    conversation_id=self.conversation_id,
                    file_name=pending.file_name,
                    mime_type=pending.mime_type,
                    byte_size=pending.byte_size,
                    line_count=pending.line_count,
                    token_count=pending.token_count,
                    sha256=pending.sha256,
                    storage_key=self.written[pending.file_id],
                    exploration_summary=pending.exploration_summary,
                    tool_name=pending.tool_name,
                )
            )
        LargeFile.objects.bulk_create(rows)
        self.recorded.update(row.id for row in rows)

    def _stored(self) -> set[str]:
        """After an error: the recorded ids whose rows exist (the commit may have happened)."""
        if not self.recorded:
            return set()
        return set(LargeFile.objects.filter(id__in=self.recorded).values_list("id", flat=True))

    def _discard(self, keep: set[str]) -> None:
        unused = [key for file_id, key in self.written.items() if file_id not in keep]
        if not unused:
            return
        try:
            delete_objects(unused)
        except Exception:  # the integrity check reports what could not be removed
            logger.exception("could not remove objects of an ingest: %s", unused)


@contextmanager
def large_files_staged(
    *, conversation_id: int, batch: PreparedBatch | None
) -> Iterator[StagedFiles]:
    """Write the batch's new objects now (call with no transaction open); inside the block,
    `record` their rows; afterwards, delete every object written here that has no row."""
    staged = StagedFiles(conversation_id, batch)
    try:
        staged._write()
        yield staged
    except BaseException:
        try:
            keep = staged._stored()
        except Exception:  # cannot tell: keep them all, the integrity check reports orphans
            logger.exception("could not check the rows of a failed ingest: %s", staged.written)
        else:
            staged._discard(keep)
        raise
    staged._discard(staged.recorded)
