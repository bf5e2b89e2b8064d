"""django-q2 entry points of the memory app (each calls one service)."""

from __future__ import annotations

from django.conf import settings

from memory.indexing import index_conversation_messages
from memory.reindex import reindex_namespace as _reindex_namespace
from memory.summaries import index_summaries as _index_summaries


def index_conversation(conversation_id: int) -> int:
    return index_conversation_messages(
        conversation_id=conversation_id, seconds=settings.LCM_MEMORY_INDEX_JOB_SECONDS
    ).chunks_created


def reindex_namespace(namespace_id: int) -> float:
    return _reindex_namespace(namespace_id=namespace_id).progress


def index_summaries(conversation_id: int) -> int:
    return _index_summaries(conversation_id=conversation_id)
