"""Deliver to this server: import the changed unit with the ordinary importer, which
appends through `conversations.services.messages_append` (large-file interception,
indexing, compaction, retention) and skips every message whose external id is stored.

Crash safety: the import is idempotent, and the offset is written only after it
committed. A crash between the two re-reads the same lines at the next start and adds
nothing; a crash before the import commits loses nothing, since the offset did not move.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.api.errors import LcmError
from importers.services import import_file


@dataclass
class Delivery:
    messages: int = 0
    conversations: int = 0
    errors: list[str] = field(default_factory=list)


class LocalSink:
    def __init__(self, user):
        self.user = user
        self.target = f"local:{user.get_username()}"

    def deliver(self, unit: Path, format: str, changes: list, complete_lines: int | None):
        delivery = Delivery()
        if not unit.exists():
            return delivery  # a sub-agent file before its session file: imported with it
        try:
            report = import_file(format=format, path=unit, owner=self.user)
        except LcmError as error:
            # A file rewritten whole and read mid-write is not valid yet: try next time.
            raise Retry(error.message) from None
        data = report.as_dict()
        totals = data["totals"]
        delivery.messages = totals["messages"]
        delivery.conversations = totals["conversations"]
        for error in data["errors"]:
            line = error.get("line")
            if complete_lines is not None and isinstance(line, int) and line > complete_lines:
                continue  # the half-written last line: read when it is whole
            delivery.errors.append(f"line {line}: {error['message']}")
        for conversation in data["conversations"]:
            for problem in conversation["problems"]:
                delivery.errors.append(f"{problem['code']}: {problem['message']}")
        return delivery


class Retry(Exception):
    """The unit could not be read now (mid-write, server down): its offsets stay."""
