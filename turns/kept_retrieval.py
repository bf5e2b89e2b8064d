"""A turn's retrieved-memory block, kept in its user message's later renderings (issue 46).

A turn sends its retrieved memory as the last block of its user message. Every later
request that sends that message again from history sends the same block after it, byte for
byte, so the block is written to the provider's cache once and read on every later turn
instead of being sent uncached and then never seen again. The block is not part of the
stored message (canonical messages are never rewritten): it is read back from the turn's
stored context (`retrieved_block`, `retrieved_ids`), which is immutable once prepared.

The same record says which memory units the request already carries, so the next turns'
retrieval never injects a second copy of them (`held_context`).
"""

from __future__ import annotations

from collections.abc import Iterable

from conversations.models import Message
from turns.models import UserTurn

_USER_SUFFIX = ":user"


def _turn_id(external_id: str | None) -> str | None:
    """`turn:{id}:user` -> id (the mirror's external id of a turn's user message)."""
    if not external_id or not external_id.startswith("turn:"):
        return None
    if not external_id.endswith(_USER_SUFFIX):
        return None
    return external_id[len("turn:") : -len(_USER_SUFFIX)]


def kept_for_turns(turn_ids: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
    """{turn id: (retrieved block, chunk ids)} of the turns that sent a block."""
    ids = list(dict.fromkeys(turn_ids))
    if not ids:
        return {}
    rows = UserTurn.objects.filter(pk__in=ids).values_list(
        "pk", "context__retrieved_block", "context__retrieved_ids"
    )
    return {pk: (block, list(chunks or [])) for pk, block, chunks in rows if block}


class KeptBlocks:
    """The `appended_text` resolver the `lcm` history passes to the assembler: message
    ids -> the block each turn's user message carried. Remembers what it found, for the
    budget (`tokens`) and for retrieval (`chunk_ids`)."""

    def __init__(self, conversation_id: int):
        self.conversation_id = conversation_id
        self.found: dict[int, tuple[str, list[str]]] = {}

    def __call__(self, message_ids: list[int]) -> dict[int, str]:
        external = dict(
            Message.objects.filter(
                pk__in=message_ids,
                conversation_id=self.conversation_id,
                external_id__endswith=_USER_SUFFIX,
            ).values_list("pk", "external_id")
        )
        by_turn = {_turn_id(ext): pk for pk, ext in external.items() if _turn_id(ext)}
        kept = kept_for_turns(by_turn)
        self.found = {by_turn[turn_id]: value for turn_id, value in kept.items()}
        return {message_id: block for message_id, (block, _) in self.found.items()}

    @property
    def chunk_ids(self) -> set[str]:
        return {chunk for _, chunks in self.found.values() for chunk in chunks}


def held_context(message_seqs: dict[int, Iterable[int]], chunk_ids: Iterable[str]) -> dict:
    """What the assembled context holds, in the form the memory port takes."""
    return {
        "messages": {conversation: set(seqs) for conversation, seqs in message_seqs.items()},
        "chunk_ids": set(chunk_ids),
    }
