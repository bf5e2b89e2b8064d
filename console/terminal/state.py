"""What the terminal chat holds between lines: the API client, the output, the session
and the model, tools mode and chunks chosen for the next turn, and the header, refreshed
from the session's detail."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TextIO

from console.terminal.client import ApiClient, rows, segment
from console.terminal.header import Header


@dataclass
class Chat:
    api: ApiClient
    out: TextIO
    session_id: str = ""
    model: str = ""
    tools_mode: str = ""
    attached: list[str] = field(default_factory=list)
    header: Header = field(default_factory=Header)

    # --- output ---------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def show_header(self) -> None:
        self.say(self.header.line())

    # --- session and header ---------------------------------------------------------------

    def open(self, session_id: str | None, title: str = "") -> None:
        if session_id:
            session = self.api.request("GET", f"sessions/{segment(session_id)}/")
        else:
            body = {"title": title or "terminal chat"}
            if self.model:
                body["default_model"] = self.model
            session = self.api.request("POST", "sessions/", body)
        self.session_id = session["id"]
        self.header.session = session["id"]
        self.header.session_title = session.get("title", "")
        self.model = self.model or session.get("default_model", "") or self._default_model()
        self.tools_mode = self.tools_mode or session.get("tools_mode", "")
        self.refresh(session)

    def _default_model(self) -> str:
        models = rows(self.api.request("GET", "models/"))
        return next((m["name"] for m in models if m.get("default")), "")

    def refresh(self, session: dict | None = None) -> None:
        """The header from the session detail (active branch, its head and pending count)."""
        session = session or self.api.request("GET", f"sessions/{segment(self.session_id)}/")
        if "branches" not in session:
            session = self.api.request("GET", f"sessions/{segment(self.session_id)}/")
        branch_id = session.get("active_branch_id")
        branch = next((b for b in session.get("branches", []) if b["id"] == branch_id), {})
        self.header.branch = branch_id or ""
        self.header.branch_label = branch.get("label", "")
        self.header.head_seq = session.get("head_seq", branch.get("head_seq"))
        self.header.head_state_id = (
            session.get("head_state_id") or branch.get("head_state_id") or ""
        )
        self.header.pending = int(session.get("pending_count", branch.get("pending_count", 0)) or 0)
