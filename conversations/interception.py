"""Before an append: a registered interceptor may take content out of the messages.

The large-file app registers one in its ready() (largefiles/ingest.py): file blocks and
tool outputs at or above LCM_LARGE_FILE_TOKEN_THRESHOLD tokens are stored aside and
replaced by a reference. The store calls it through this small protocol and does not
import that app, which sits above it (docs/architecture.md). With no interceptor
registered, messages are stored as sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from conversations.inputs import MessageInput


class StagedContent(Protocol):
    def record(self, *, used: set[str]) -> None:
        """Inside the ingest transaction, under the conversation lock: store the rows of
        the set-aside objects that the `used` ids refer to."""


class Intercepted(Protocol):
    messages: list[MessageInput]  # the rewritten inputs
    file_ids: list[list[str]]  # each message's file ids
    remapped: dict[str, str]  # id -> the id of the same bytes a concurrent writer stored

    def staged(self, *, conversation_id: int) -> AbstractContextManager[StagedContent]:
        """Write the set-aside objects now (no transaction open); afterwards, delete those
        that got no row."""

    def swap_ids(self, item: MessageInput, mapping: dict[str, str]) -> MessageInput: ...


Interceptor = Callable[..., "Intercepted | None"]  # (conversation_id=, messages=)
_interceptor: Interceptor | None = None


def register_interceptor(interceptor: Interceptor) -> None:
    global _interceptor
    _interceptor = interceptor


def intercept(*, conversation_id: int, messages: Sequence[MessageInput]) -> Intercepted | None:
    """The rewritten batch, or None when there is nothing to set aside."""
    if _interceptor is None:
        return None
    return _interceptor(conversation_id=conversation_id, messages=messages)


class NothingStaged:
    """The staged content of a batch with nothing set aside."""

    def record(self, *, used: set[str]) -> None:
        return None
