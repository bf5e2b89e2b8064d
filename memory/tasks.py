"""django-q2 entry points of the memory app (each calls one service)."""

from __future__ import annotations

from memory.indexing import index_conversation_messages
from memory.reindex import reindex_namespace as _reindex_namespace


def index_conversation(conversation_id: int) -> int:
    return index_conversation_messages(conversation_id=conversation_id).chunks_created


def reindex_namespace(namespace_id: int) -> float:
    return _reindex_namespace(namespace_id=namespace_id).progress
