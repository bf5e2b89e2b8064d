"""The code paths that read a message's parts, registered by name, so the integrity
check `part_reader_disorder` (integrity.checks.part_order) can run each over messages
whose rows are stored out of ordinal order and name any that hands them back so.

A reader takes message ids and returns, per message, the ordinals of its parts in the
order the reader yields them. The readers of the store's own layers are registered
below; apps above integrity (explorer, memory, importers, security) register theirs in
their `AppConfig.ready()`. A new path that reads parts registers here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

PartReader = Callable[[Sequence[int]], dict[int, list[int]]]
PART_READERS: dict[str, PartReader] = {}


def register_part_reader(name: str, reader: PartReader) -> None:
    PART_READERS[name] = reader


def ordinals_of(messages: Iterable) -> dict[int, list[int]]:
    """What a reader that yields `Message` instances with their parts hands back."""
    return {m.pk: [p.ordinal for p in m.parts.all()] for m in messages}


def _messages_api(message_ids: Sequence[int]) -> dict[int, list[int]]:
    from conversations.models import Conversation
    from conversations.selectors import messages_of

    found: dict[int, list[int]] = {}
    conversations = Conversation.objects.filter(messages__pk__in=message_ids).distinct()
    for conversation in conversations:
        found |= ordinals_of(messages_of(conversation=conversation).filter(pk__in=message_ids))
    return found


def _serializers(message_ids: Sequence[int]) -> dict[int, list[int]]:
    from conversations.models import Message
    from conversations.serializers import MessageSerializer

    messages = Message.objects.filter(pk__in=message_ids).prefetch_related("parts")
    return {
        row["id"]: [p["ordinal"] for p in row["parts"]]
        for row in MessageSerializer(messages, many=True).data
    }


def _archive_forms(message_ids: Sequence[int]) -> dict[int, list[int]]:
    from archive.segments import forms_of
    from conversations.models import Message

    forms = forms_of(list(Message.objects.filter(pk__in=message_ids)))
    return {form["id"]: [p["ordinal"] for p in form["parts"]] for form in forms}


def _assembly(message_ids: Sequence[int]) -> dict[int, list[int]]:
    from compaction.assembly import message_parts

    return {m: [p["ordinal"] for p in parts] for m, parts in message_parts(message_ids).items()}


register_part_reader("conversations.messages_of", _messages_api)
register_part_reader("conversations.serializers", _serializers)
register_part_reader("archive.forms_of", _archive_forms)
register_part_reader("compaction.assembly", _assembly)
