"""Reads of large files, through the access checkpoint."""

from __future__ import annotations

from conversations.selectors import conversation_get_for_user
from core.api.errors import InvalidInput, NotFound, Unavailable
from largefiles.models import LargeFile
from largefiles.store import read_range


def large_file_get_for_user(*, user, file_id: str) -> LargeFile:
    """A file of a conversation the user may see; any other id is the same 404."""
    row = LargeFile.objects.filter(pk=file_id).first()
    if row is not None:
        try:
            conversation_get_for_user(user=user, conversation_id=row.conversation_id)
        except NotFound:
            row = None
    if row is None:
        raise NotFound(f"file {file_id} not found", extra={"file_id": file_id})
    return row


def large_file_read(*, large_file: LargeFile, offset: int, limit: int) -> bytes:
    """Up to `limit` raw bytes from `offset` (0 <= offset <= size)."""
    if offset > large_file.byte_size:
        raise InvalidInput(
            f"offset {offset} is past the end of the file ({large_file.byte_size} bytes)",
            extra={"field": "offset", "byte_size": large_file.byte_size},
        )
    if offset == large_file.byte_size:
        return b""
    try:
        return read_range(large_file.storage_key, offset=offset, limit=limit)
    except FileNotFoundError:
        # The row outlived its object (a restore without the files): a server-side fault
        # the integrity check `file_object_missing` reports, not the client's.
        raise Unavailable(
            f"the stored content of file {large_file.id} is missing",
            code="file_content_missing",
            extra={"file_id": large_file.id},
        ) from None
