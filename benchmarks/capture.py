"""`lcm_eval capture PATH...`: import coding-agent session files and say, per file, how
whole the result is (docs/benchmarks.md, "Capture").

Per file: the records read, the messages stored, the messages on the main conversation
against the user/assistant records of the file, the tool calls against the ones paired
with a result, the conversations made (and why each other one exists), the agent's own
compactions linked in the summary DAG, the lines refused, and what a second import added
(it must be nothing). Writes under the user `lcm-eval-capture`: use a scratch database.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db.models import Q

from conversations.models import Conversation, MessagePart, Summary
from importers.models import Format
from importers.services import import_file

USER = "lcm-eval-capture"
NOT_SESSIONS = {"projects.json", "settings.json", "installation_id", "user_id"}


def detect_format(path: Path) -> str | None:
    """The agent that wrote a session file, from its name and first bytes."""
    if path.is_dir():
        return Format.OPENCODE if (path / "storage").is_dir() or path.name == "storage" else None
    with path.open("rb") as handle:
        head = handle.read(16)
    if head == b"SQLite format 3\x00":
        return Format.OPENCODE
    if path.suffix == ".json":
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if isinstance(document, dict) and "sessionId" in document:
            return Format.GEMINI
        if isinstance(document, dict) and "info" in document:
            return Format.OPENCODE
        return None
    if path.name.endswith((".jsonl", ".jsonl.zst")):
        if path.name.startswith("rollout-") or path.suffix == ".zst":
            return Format.CODEX
        first = _first_record(path)
        if isinstance(first, dict) and "payload" in first:
            return Format.CODEX
        if isinstance(first, dict) and "sessionId" in first and "projectHash" in first:
            return Format.GEMINI  # Gemini CLI's log: its metadata line first
        return Format.CLAUDE_CODE
    return None


def _first_record(path: Path):
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for text in handle:
            if text.strip():
                try:
                    return json.loads(text)
                except ValueError:
                    return None
    return None


def session_files(paths: list[Path]) -> list[Path]:
    """The session files under the given files and folders (sub-agent files are read with
    their session, so they are not listed on their own)."""
    found: list[Path] = []
    for path in paths:
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for candidate in candidates:
            if "subagents" in candidate.parts or candidate.name.startswith("agent-"):
                continue
            if candidate.suffix in (".md", ".txt") or candidate.name.endswith(("-wal", "-shm")):
                continue
            if candidate.name.startswith(".") or candidate.name in NOT_SESSIONS:
                continue  # Gemini's .project_root and projects.json, and the like
            found.append(candidate)
    return found


def source_records(fmt: str, path: Path) -> tuple[int, int]:
    """(records read, user/assistant records) as the file itself counts them."""
    if fmt == Format.OPENCODE and path.suffix == ".db":
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            messages = connection.execute("SELECT count(*) FROM message").fetchone()[0]
            parts = connection.execute("SELECT count(*) FROM part").fetchone()[0]
        finally:
            connection.close()
        return messages + parts, messages
    from importers.transcripts.common import Parsed, read_jsonl

    if fmt == Format.GEMINI:
        return _gemini_records(path)
    lines = [line.value for line in read_jsonl(path, Parsed())]
    if fmt == Format.CODEX:
        said = [
            r
            for r in lines
            if isinstance(r, dict)
            and r.get("type") == "response_item"
            and (r.get("payload") or {}).get("type") != "ghost_snapshot"
            and (r.get("payload") or {}).get("role") not in ("developer", "system")
        ]
        return len(lines), len(said)
    said = [
        r
        for r in lines
        if isinstance(r, dict)
        and r.get("type") in ("user", "assistant")
        and not r.get("isSidechain")
    ]
    return len(lines), len(said)


def _gemini_records(path: Path) -> tuple[int, int]:
    """(messages, user/gemini messages), each id once (the log rewrites a message with a
    later record of the same id); a user message that only sends tool results back to
    the model is not counted: the results are said on their calls."""
    from importers.transcripts.common import Parsed, read_jsonl

    if path.suffix == ".json":
        messages = json.loads(path.read_text(encoding="utf-8")).get("messages") or []
    else:
        found = []
        for line in read_jsonl(path, Parsed()):
            patch = line.value.get("$set") if isinstance(line.value, dict) else None
            listed = patch.get("messages") if isinstance(patch, dict) else None
            found.extend(listed if isinstance(listed, list) else [line.value])  # 0.61's context
        by_id = {m["id"]: m for m in found if isinstance(m, dict) and "id" in m and "type" in m}
        messages = list(by_id.values())
    said = [
        m
        for m in messages
        if isinstance(m, dict) and m.get("type") in ("user", "gemini") and not _results_only(m)
    ]
    return len(messages), len(said)


def _results_only(message: dict) -> bool:
    content = message.get("content")
    return (
        message.get("type") == "user"
        and isinstance(content, list)
        and bool(content)
        and all(isinstance(p, dict) and "functionResponse" in p for p in content)
    )


@dataclass
class FileFigures:
    file: str
    format: str
    records: int = 0
    said: int = 0  # user/assistant records in the file
    stored: int = 0
    main_line: int = 0
    tool_calls: int = 0
    tool_paired: int = 0
    conversations: list[str] = field(default_factory=list)
    compactions_linked: int = 0
    compactions_unlinked: int = 0
    refused: int = 0
    second_import_added: int = 0
    seconds: float = 0.0

    def row(self) -> str:
        made = len(self.conversations)
        return (
            f"| `{self.file}` | {self.format} | {self.records} | {self.stored} | "
            f"{self.main_line} / {self.said} | {self.tool_paired} / {self.tool_calls} | "
            f"{made}: {', '.join(self.conversations)} | {self.compactions_linked}"
            f"{f' (+{self.compactions_unlinked} not linkable)' if self.compactions_unlinked else ''}"
            f" | {self.refused} | {self.second_import_added} |"
        )


HEADER = (
    "| file | format | records read | messages stored | main line / user+assistant records "
    "| tool calls paired / calls | conversations (why) | agent compactions linked "
    "| lines refused | 2nd import added |\n|---|---|---|---|---|---|---|---|---|---|"
)


def _tool_figures(conversation_ids: list[int]) -> tuple[int, int]:
    """(calls, calls with a result) by call id: a branch repeats its shared start, whose
    calls are counted once."""
    tools = MessagePart.objects.filter(
        message__conversation_id__in=conversation_ids, part_type="tool"
    ).values_list("tool_call_id", "tool_input", "tool_output")
    calls: set[str] = set()
    answered: set[str] = set()
    for call_id, tool_input, tool_output in tools:
        if tool_input is not None:
            calls.add(call_id or "")
        if tool_output is not None:
            answered.add(call_id or "")
    return len(calls), len(calls & answered)


def _why(conversation: Conversation) -> str:
    meta = getattr(getattr(conversation, "import_source", None), "metadata", None) or {}
    line = meta.get("line", "main")
    if line == "branch":
        return "branch: " + meta.get("branch_reason", "")
    return line


def evaluate_file(path: Path, owner) -> FileFigures:
    fmt = detect_format(path) or ""
    figures = FileFigures(file=path.name, format=fmt)
    if not fmt:
        return figures
    figures.records, figures.said = source_records(fmt, path)
    report = import_file(format=fmt, path=path, owner=owner)
    again = import_file(format=fmt, path=path, owner=owner)
    figures.seconds = report.seconds
    figures.stored = report.totals()["messages"]
    figures.refused = len(report.errors)
    figures.second_import_added = again.totals()["messages"]
    ids = [c.conversation_id for c in report.conversations if c.conversation_id]
    conversations = list(
        Conversation.objects.filter(pk__in=ids).select_related("import_source").order_by("pk")
    )
    figures.conversations = [_why(c) for c in conversations]
    main = next((c for c in conversations if _why(c) == "main"), None)
    if main is not None:
        figures.main_line = main.messages.filter(role__in=("user", "assistant", "tool")).count()
    figures.tool_calls, figures.tool_paired = _tool_figures(ids)
    figures.compactions_linked = Summary.objects.filter(
        Q(conversation_id__in=ids), model__endswith="(agent compaction)"
    ).count()
    figures.compactions_unlinked = sum(
        1
        for c in report.conversations
        for p in c.problems
        if p["code"] == "agent_compaction_not_linked"
    )
    return figures


def run(paths: list[Path]) -> list[FileFigures]:
    owner, _ = get_user_model().objects.get_or_create(username=USER)
    return [evaluate_file(path, owner) for path in session_files(paths)]
