"""What an import did (or, with --dry-run, would do): per conversation, the rows written per
table and the problems met; per input line, the errors that skipped it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TABLES = (
    "conversations",
    "messages",
    "message_parts",
    "summaries",
    "summary_messages",
    "summary_parents",
    "context_items",
    "large_files",
)


def empty_counts() -> dict[str, int]:
    return dict.fromkeys(TABLES, 0)


@dataclass
class ConversationResult:
    session_id: str
    conversation_id: int | None = None
    created: bool = False
    counts: dict[str, int] = field(default_factory=empty_counts)
    source_counts: dict[str, int] | None = None
    problems: list[dict[str, Any]] = field(default_factory=list)
    failed: str = ""  # set when nothing of this conversation was written

    def problem(self, code: str, message: str, **extra) -> None:
        self.problems.append({"code": code, "message": message, **extra})

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "conversation_id": self.conversation_id,
            "created": self.created,
            "counts": self.counts,
            "problems": self.problems,
        }
        if self.source_counts is not None:
            data["source_counts"] = self.source_counts
        if self.failed:
            data["failed"] = self.failed
        return data


@dataclass
class ImportReport:
    format: str
    source: str
    dry_run: bool
    conversations: list[ConversationResult] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)  # [{"line", "message"}]
    notes: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def line_error(self, line: int | None, message: str) -> None:
        self.errors.append({"line": line, "message": message})

    def totals(self) -> dict[str, int]:
        totals = empty_counts()
        for result in self.conversations:
            for table, count in result.counts.items():
                totals[table] = totals.get(table, 0) + count
        return totals

    @property
    def ok(self) -> bool:
        return not self.errors and not any(r.failed or r.problems for r in self.conversations)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "source": self.source,
            "dry_run": self.dry_run,
            "totals": self.totals(),
            "conversations": [r.as_dict() for r in self.conversations],
            "errors": self.errors,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
        }
