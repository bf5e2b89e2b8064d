"""Display helpers for the console templates. None marks text safe: output is escaped."""

from __future__ import annotations

import json

from django import template
from django.urls import reverse

register = template.Library()


@register.filter
def message_text(message) -> str:
    """The visible text of a stored message dict (rendered_text, else its text blocks)."""
    from console.presenters import text_of

    if isinstance(message, dict):
        return text_of(message)
    return "" if message is None else str(message)


@register.filter
def pretty(value) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(value)


@register.filter
def width_class(percent) -> str:
    """A width class in 1% steps (the CSP forbids inline style attributes)."""
    try:
        value = float(percent)
    except (TypeError, ValueError):
        return "w-0"
    return f"w-{max(1, min(100, round(value)))}"


@register.simple_tag
def chat_link_for(conversation) -> dict | None:
    """The console chat of the session whose branch this conversation backs, if any."""
    branch = getattr(conversation, "turn_branch", None) if conversation else None
    if branch is None:
        return None
    return {
        "url": reverse("console:chat", args=[branch.session_id]),
        "label": branch.label or branch.session_id,
    }
