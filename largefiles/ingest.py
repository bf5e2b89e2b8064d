"""The store's interceptor (conversations/interception.py): at append time, large file
blocks and tool outputs are explored, stored aside and replaced by references."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

from django.conf import settings

from conversations.inputs import MessageInput
from largefiles.intercept import PreparedBatch, prepare_batch, swap_file_ids
from largefiles.services import StagedFiles, large_files_staged
from largefiles.textmodel import text_summarizer


class Interception:
    """One append's batch with its large files taken out."""

    def __init__(self, batch: PreparedBatch) -> None:
        self.batch = batch
        self.messages = batch.messages
        self.file_ids = batch.file_ids
        self.remapped = batch.remapped  # filled by StagedFiles.record under the lock

    def staged(self, *, conversation_id: int) -> AbstractContextManager[StagedFiles]:
        return large_files_staged(conversation_id=conversation_id, batch=self.batch)

    def swap_ids(self, item: MessageInput, mapping: dict[str, str]) -> MessageInput:
        return swap_file_ids(item, mapping)


def intercept(*, conversation_id: int, messages: Sequence[MessageInput]) -> Interception | None:
    batch = prepare_batch(
        conversation_id=conversation_id,
        messages=messages,
        threshold=settings.LCM_LARGE_FILE_TOKEN_THRESHOLD,
        summarize_text=text_summarizer(),
    )
    return None if batch is None else Interception(batch)
