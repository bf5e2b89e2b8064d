"""The items a receipt refers to, and the readers that give their texts back.

An item is a stored, immutable thing a model call was built from: a message, a summary, a
turn state's pinned facts or folded state, a memory chunk. A call site names the items it
put in a request (`ItemRef`, with why each is there); the recorder asks the reader of each
kind for the items' texts (the strings a request carries: a message's content and its
parts', a summary's text and its rendering) to find them in the body, and the replay asks
again to put them back. Readers are registered by the app that owns the rows, in its
`ready()` (messages here; summaries by compaction, states by turns, chunks by memory); an
item of a kind nobody reads stays literal in the receipt's template (exact, just larger).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Why an item is in a request (docs/receipts.md, "Why each item is there").
REASONS = {
    "tail": "fresh tail (the newest messages, always sent)",
    "history": "history that fit the budget",
    "summary": "summary standing for older messages",
    "pinned": "pinned fact",
    "state": "the conversation state as of the last fold",
    "retrieved": "retrieved by the query",
    "tool_loop": "tool loop (a call and its result in this turn)",
    "input": "sent by the client in this request",
    "source": "a source the summarizer was asked to summarize",
    "expansion": "read by the sub-agent expansion",
    "librarian": "read by the librarian",
}


@dataclass(frozen=True)
class ItemRef:
    """One item of a request, as its call site names it."""

    kind: str  # "message" | "summary" | "state" | "chunk" | ...
    id: int | str
    reason: str = "history"  # a key of REASONS
    score: float | None = None  # retrieved: the score
    tokens: int | None = None  # the call site's count; else the reader's


@dataclass
class ItemText:
    """What a reader gives back for one item."""

    texts: list[str]  # every string of the item a request may carry, in a stable order
    tokens: int = 0
    version: int = 1  # rises when the stored item changes (a redaction)
    redacted: bool = False  # the texts carry a redaction marker
    about: dict = field(default_factory=dict)  # for people: seq, role, covers, ...


Reader = Callable[[list], dict]  # ids -> {id: ItemText}; ids not found are left out

_readers: dict[str, Reader] = {}


def register_item_reader(kind: str, reader: Reader) -> None:
    _readers[kind] = reader


def read_items(refs: Iterable[tuple[str, int | str]]) -> dict[tuple[str, int | str], ItemText]:
    """The texts of the items named by (kind, id): one reader call per kind."""
    by_kind: dict[str, list] = {}
    for kind, item_id in refs:
        by_kind.setdefault(kind, []).append(item_id)
    found: dict[tuple[str, int | str], ItemText] = {}
    for kind, ids in by_kind.items():
        reader = _readers.get(kind)
        if reader is None:
            continue
        for item_id, text in reader(list(dict.fromkeys(ids))).items():
            found[(kind, item_id)] = text
    return found


def short_hash(texts: list[str]) -> str:
    """Four hex digits of the item's texts: enough to say which item changed since the
    call (the receipt's full body digest says whether anything did)."""
    digest = hashlib.blake2b(digest_size=2)
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def content_hash(texts: list[str]) -> str:
    """The item's full content hash (SHA-256 of its texts), as pages and the API show it."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()
