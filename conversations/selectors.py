"""Reads of the canonical store, and the one access checkpoint."""

from __future__ import annotations

from django.db.models import Count, QuerySet, Sum

from conversations.models import ContextItem, Conversation, Message, Summary
from core.api.errors import NotFound


def conversations_visible_to(user) -> QuerySet[Conversation]:
    """Staff see every conversation; everyone else only their own; anonymous none."""
    if not getattr(user, "is_authenticated", False):
        return Conversation.objects.none()
    if user.is_staff:
        return Conversation.objects.all()
    return Conversation.objects.filter(owner=user)


def conversation_get_for_user(*, user, conversation_id: int) -> Conversation:
    """THE access checkpoint: a conversation the user may not see does not exist (404)."""
    conversation = conversations_visible_to(user).filter(pk=conversation_id).first()
    if conversation is None:
        raise NotFound(f"conversation {conversation_id} not found")
    return conversation


def conversation_list_for_user(*, user, session_id: str | None = None) -> QuerySet[Conversation]:
    queryset = conversations_visible_to(user)
    if session_id is not None:
        queryset = queryset.filter(session_id=session_id)
    return queryset


def conversation_stats(*, conversation: Conversation) -> dict:
    context = ContextItem.objects.filter(conversation=conversation).aggregate(
        items=Count("id"), tokens=Sum("token_count")
    )
    by_kind = dict(
        Summary.objects.filter(conversation=conversation)
        .values_list("kind")
        .annotate(n=Count("id"))
        .values_list("kind", "n")
    )
    return {
        "message_count": conversation.last_seq,
        "context_item_count": context["items"] or 0,
        "context_tokens": context["tokens"] or 0,
        "summaries": {"leaf": by_kind.get("leaf", 0), "condensed": by_kind.get("condensed", 0)},
    }


def messages_of(*, conversation: Conversation) -> QuerySet[Message]:
    return Message.objects.filter(conversation=conversation).prefetch_related("parts")


def context_items_of(*, conversation: Conversation) -> QuerySet[ContextItem]:
    return ContextItem.objects.filter(conversation=conversation)
