"""The reader of the kind of item this app's layer owns: messages (the canonical store)."""

from __future__ import annotations

from conversations.archive_port import archived_forms
from conversations.models import Message, MessagePart
from receipts.items import ItemText

REDACTION_MARKER = "[redacted"  # security's markers all start so (docs/security.md)
_PART_TEXTS = ("text_content", "tool_output", "tool_error")


def read_messages(ids: list) -> dict:
    """Each message's texts: its content, then each part's text, tool output and error (the
    strings a request carries for it on any wire), archived content included."""
    rows = list(
        Message.objects.filter(pk__in=ids).values_list(
            "id", "seq", "role", "content", "token_count", "archived_in"
        )
    )
    archived = archived_forms(r[0] for r in rows if r[5] is not None)
    parts: dict[int, list[str]] = {}
    live = [r[0] for r in rows if r[5] is None]
    for row in sorted(
        MessagePart.objects.filter(message_id__in=live).values_list(
            "message_id", "ordinal", *_PART_TEXTS
        )
    ):
        parts.setdefault(row[0], []).extend(t for t in row[2:] if t)
    found = {}
    for pk, seq, role, content, tokens, archived_in in rows:
        if archived_in is not None:
            form = archived.get(pk) or {"content": "", "parts": []}
            content = form["content"]
            ordered = sorted(form.get("parts") or [], key=lambda p: p.get("ordinal", 0))
            parts[pk] = [p[c] for p in ordered for c in _PART_TEXTS if p.get(c)]
        texts = [content, *parts.get(pk, [])]
        found[pk] = ItemText(
            texts=texts,
            tokens=tokens,
            redacted=any(REDACTION_MARKER in t for t in texts),
            about={"seq": seq, "role": role},
        )
    return found
