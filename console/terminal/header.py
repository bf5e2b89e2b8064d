"""The chat's status line: session, branch, head state, pending turns, phase and, while an
answer streams, how much of it is durable (fsynced) of what was shown."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Header:
    session: str = ""
    session_title: str = ""
    branch: str = ""
    branch_label: str = ""
    head_seq: int | None = None
    head_state_id: str = ""
    pending: int = 0
    phase: str = "idle"
    durable: int = 0
    displayed: int = 0
    streaming: bool = False

    def line(self) -> str:
        head = "none" if self.head_seq is None else str(self.head_seq)
        parts = [
            f"Session: {self.session_title or self.session} ({self.session})",
            f"Branch: {self.branch_label or self.branch}",
            f"Head: seq {head} {self.head_state_id}".rstrip(),
            f"Pending: {self.pending}",
            f"Phase: {self.phase}",
        ]
        if self.streaming or self.displayed:
            buffered = " buffered" if self.displayed > self.durable else ""
            parts.append(f"Stream: {self.durable}/{self.displayed} B{buffered}")
        return "[" + " | ".join(parts) + "]"
