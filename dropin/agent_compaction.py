"""An agent's compaction seen through the drop-in, stored as what it is: when an agent
continues past the checkpoint the product gave it (dropin/checkpoint.py), the checkpoint
becomes an agent compaction (importers/transcripts/agent_compactions.py) over the messages
it replaced in the agent's context: those since the agent's previous compaction, up to the
message that carries the checkpoint. Written once: the summary id derives from that
message."""

from __future__ import annotations

from conversations.models import Conversation, Message
from importers.repair import last_compacted_seq
from importers.report import ConversationResult
from importers.transcripts.agent_compactions import link_agent_compactions
from importers.transcripts.common import AgentCompaction


def checkpoint_link(*, conversation_id: int, at_external_id: str, text: str, author: str) -> None:
    """Link the checkpoint the message `at_external_id` carries as `author`'s compaction."""
    at = (
        Message.objects.filter(conversation_id=conversation_id, external_id=at_external_id)
        .values_list("seq", flat=True)
        .first()
    )
    if at is None:
        return
    after = last_compacted_seq(conversation=Conversation(pk=conversation_id))
    covered = list(
        Message.objects.filter(
            conversation_id=conversation_id, seq__gt=after, seq__lt=at, external_id__isnull=False
        )
        .order_by("seq")
        .values_list("external_id", flat=True)
    )
    compaction = AgentCompaction(
        summary=text,
        covered=covered,
        at_external_id=at_external_id,
        author=author,
        metadata={"from": "drop-in checkpoint"},
    )
    link_agent_compactions(conversation_id, [compaction], ConversationResult(at_external_id))
