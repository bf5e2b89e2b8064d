"""Server-Sent Events read from a stream of byte lines (the terminal client's streams)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SseEvent:
    id: int | None
    event: str
    data: dict


def parse_sse(lines) -> Iterator[SseEvent]:
    """Server-Sent Events from an iterable of byte lines (blank line ends an event)."""
    event_id: int | None = None
    name = "message"
    data: list[str] = []
    for raw in lines:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if data or event_id is not None:
                text = "\n".join(data)
                try:
                    parsed = json.loads(text) if text else {}
                except ValueError:
                    parsed = {"text": text}
                yield SseEvent(
                    event_id, name, parsed if isinstance(parsed, dict) else {"value": parsed}
                )
            event_id, name, data = None, "message", []
            continue
        if line.startswith(":"):
            continue
        field_name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field_name == "id":
            try:
                event_id = int(value)
            except ValueError:
                event_id = None
        elif field_name == "event":
            name = value
        elif field_name == "data":
            data.append(value)
