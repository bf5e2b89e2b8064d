"""Reads of archived content (docs/retention.md): the port through which the store's readers
reach the archive app, which sits above the store and fills it in its `ready()`.

An archived message keeps its row (id, seq, role, times, token count, file ids) and its
parts' skeletons; its `content` and its parts' content columns live in an archive segment,
named by `Message.archived_in`. Every reader that shows content (the messages API, describe,
expand, the explorer, MCP, export, the turn engine's mirror) calls `hydrate_messages` or
`archived_contents` on what it read, so archived content comes back through the same calls,
marked `from_archive`.

With no reader registered (the archive app not installed), archived messages read as stored:
empty content, `from_archive` True; nothing is invented.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from conversations.models import ARCHIVED_PART_COLUMNS

# message ids -> {message id: canonical form} (the dict an archive segment holds: the
# message's columns and "parts", a list of its parts' columns)
Reader = Callable[[list[int]], dict[int, dict]]

_reader: Reader | None = None


def register_archive_reader(reader: Reader) -> None:
    global _reader
    _reader = reader


def archived_forms(message_ids: Iterable[int]) -> dict[int, dict]:
    ids = list(message_ids)
    if not ids or _reader is None:
        return {}
    return _reader(ids)


def archived_contents(message_ids: Iterable[int]) -> dict[int, str]:
    """`{message id: content}` of archived messages (ids not archived are left out)."""
    return {pk: form["content"] for pk, form in archived_forms(message_ids).items()}


def hydrate_messages(messages: Iterable) -> list:
    """Put the archived content back into `Message` instances read from the database (and
    into their prefetched parts), in place; each gets `from_archive` (True or False)."""
    messages = list(messages)
    archived = [m for m in messages if m.archived_in is not None]
    for message in messages:
        message.from_archive = message.archived_in is not None
    if not archived:
        return messages
    forms = archived_forms(m.pk for m in archived)
    for message in archived:
        form = forms.get(message.pk)
        if form is None:
            continue
        message.content = form["content"]
        cache = getattr(message, "_prefetched_objects_cache", {})
        if "parts" in cache:
            by_id = {part["id"]: part for part in form["parts"]}
            for part in cache["parts"]:
                stored = by_id.get(part.pk)
                if stored is not None:
                    for column in ARCHIVED_PART_COLUMNS:
                        setattr(part, column, stored[column])
    return messages
