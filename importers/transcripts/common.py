"""What every transcript parser returns: conversations of raw message dicts (each with the
line it came from), the lines that could not be read, and the record types skipped."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.api.errors import InvalidInput

# What reading a record of an unexpected shape raises (a list where an object was due, a
# number where a string was): the record is reported with its position and skipped.
MALFORMED = (TypeError, AttributeError, ValueError, KeyError, IndexError)


@dataclass(frozen=True)
class Line:
    number: int  # 1-based line of the file (or 1-based item of a JSON array)
    value: Any


@dataclass
class AgentCompaction:
    """A compaction the agent itself did: its summary text, written over the messages
    (by external id) that it replaced in the agent's own context."""

    summary: str
    covered: list[str]  # external ids of the messages before it, in order
    at_external_id: str  # the message that carries the summary (or the boundary)
    author: str  # the agent that wrote it ("claude-code", "codex", "opencode")
    metadata: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ForkOf:
    """A session file that begins by replaying its parent's records (a Codex fork): the
    messages after `replay_after_line` may be the parent's, stored there already."""

    parent_session: str
    replay_after_line: int  # the fork's own header line; the replay may start after it


@dataclass
class ParsedConversation:
    session_id: str
    title: str = ""
    messages: list[tuple[int, dict]] = field(default_factory=list)  # (line, raw message)
    # What the agent said about the session: agent, agent_version, cwd, git_branch, model,
    # started_at, ended_at, and why the conversation exists (branch, sub-agent).
    metadata: dict = field(default_factory=dict)
    compactions: list[AgentCompaction] = field(default_factory=list)
    fork_of: ForkOf | None = None


@dataclass
class Parsed:
    conversations: list[ParsedConversation] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)

    def add(self, conversation: ParsedConversation) -> None:
        if conversation.messages:
            self.conversations.append(conversation)

    def error(self, line: int | None, message: str) -> None:
        self.errors.append({"line": line, "message": message})

    def skip(self, kind: str) -> None:
        self.skipped[kind] += 1


def open_text(path: Path):
    """A text handle on the file; `.zst` files (Codex compresses cold rollouts) are
    decompressed as they are read."""
    if path.suffix == ".zst":
        import io

        import zstandard

        raw = zstandard.ZstdDecompressor().stream_reader(path.open("rb"))
        return io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    return path.open("r", encoding="utf-8", errors="replace")


def read_jsonl(path: Path, parsed: Parsed) -> list[Line]:
    """Each non-empty line parsed; a malformed one is reported with its number and skipped."""
    lines = []
    with open_text(path) as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                lines.append(Line(number, json.loads(text)))
            except ValueError as error:
                parsed.error(number, f"not valid JSON: {error}")
    return lines


def read_json(path: Path) -> Any:
    try:
        with path.open("r", encoding="utf-8") as handle:
            return json.load(handle)
    except UnicodeDecodeError as error:
        raise InvalidInput(f"{path.name} is not UTF-8 text: {error}") from None
    except ValueError as error:
        line = getattr(error, "lineno", None)
        raise InvalidInput(
            f"{path.name} is not valid JSON (line {line}): {error}", extra={"line": line}
        ) from None
