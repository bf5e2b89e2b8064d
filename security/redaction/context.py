"""What every step of a running job reads: its row, the matcher, the marker."""

from __future__ import annotations

from dataclasses import dataclass

from security.models import Redaction
from security.redaction.matcher import Matcher, marker, unseal


@dataclass
class JobContext:
    row: Redaction
    matcher: Matcher
    mark: str
    sealed: dict  # {"literal"|"regex"|"needles": ...}

    @classmethod
    def of(cls, row: Redaction) -> JobContext:
        sealed = unseal(row.sealed)
        mark = marker(row.reason, row.pk)
        matcher = Matcher.of(
            literal=sealed.get("literal"),
            regex=sealed.get("regex"),
            needles=sealed.get("needles", []),
            mark=mark,
        )
        return cls(row=row, matcher=matcher, mark=mark, sealed=sealed)

    @property
    def whole_messages(self) -> set[int]:
        if self.row.selector_kind == "messages":
            return set(self.row.selector["message_ids"])
        return set()

    @property
    def span(self) -> dict | None:
        return self.row.selector if self.row.selector_kind == "span" else None
