"""How sources are shown to a model (and measured by the engine): `render_sources`.

Each message is an element carrying its ref, role and time; each summary carries its id
and time range. Content is data, so anything in it that looks like one of our own wrapper
tags is defanged: a message cannot close its element and forge another speaker.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compaction.summarizers.base import SourceItem, SummaryRequest

# Tag names our prompts use around data; content must not be able to open or close them.
WRAPPER_TAGS = ("source_material", "previous_context", "message", "summary")
_WRAPPER_TAG = re.compile(r"<(/?)(" + "|".join(WRAPPER_TAGS) + r")\b", re.IGNORECASE)


def defang(text: str) -> str:
    """Make `<message`, `</source_material` and friends inert (`<\\message`)."""
    return _WRAPPER_TAG.sub(r"<\\\1\2", text)


def format_time(moment: datetime) -> str:
    """ISO 8601 to the second; aware times are shown in UTC with a Z."""
    if moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
    return moment.isoformat(timespec="seconds")


def source_end(item: SourceItem) -> datetime:
    return item.latest_at or item.created_at


def render_source(item: SourceItem) -> str:
    body = defang(item.content.strip())
    if item.kind == "summary":
        start, end = format_time(item.created_at), format_time(source_end(item))
        return (
            f'<summary id="{item.ref}" earliest_at="{start}" latest_at="{end}">\n{body}\n</summary>'
        )
    role = item.role or "unknown"
    return f'<message ref="{item.ref}" role="{role}" at="{format_time(item.created_at)}">\n{body}\n</message>'


def render_sources(request: SummaryRequest) -> str:
    """The sources as a model sees them, oldest first, one element each."""
    return "\n\n".join(render_source(item) for item in request.sources)
