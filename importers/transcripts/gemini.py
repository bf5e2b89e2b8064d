"""Gemini CLI chat records (`~/.gemini/tmp/<project>/chats/session-<time>-<id>.json`): one
JSON object `{sessionId, projectHash, startTime, lastUpdated, messages[], summary?}` that
Gemini CLI rewrites whole on every save; also its newer JSONL log (a metadata line, then message
records, a later record with the same `id` rewriting it, `{"$set": {...}}` metadata patches
and `{"$rewindTo": id}` markers: the rewound messages are kept, marked `metadata.rewound`).
A `$set` of `messages` is Gemini replacing its own context: every message read before is
kept as first written; the messages new in it are added there, and when it also dropped
messages (a compression: Gemini's `<state_snapshot>` summary as a user message, then its
acknowledgement, then the recent turns it kept) the summary becomes an agent compaction
over the messages it dropped (`metadata.compression`: "summary" or "added").
The working directory comes from `directories` when the file has it.

| message | here |
|---|---|
| user | user message: `content` (a string, or parts: `text`, `inlineData`/`fileData` as file parts, `functionResponse` as tool output) |
| gemini | assistant message: `thoughts[]` as reasoning parts (subject and description), the text, then each `toolCalls[]` as ONE tool part holding its `args`, its result (`result[].functionResponse.response`: `output`, else the JSON) and its `status`; `tokens` and `model` in metadata |
| info, error, warning | system message, its type in `metadata.gemini_type` |
| anything else | counted in the report's notes |

A gemini message whose tool calls are still running (status scheduled, validating,
executing, awaiting approval) is left for the next import, so it is stored once, whole.
External ids are `gemini:<session id>:<message id>`: importing the rewritten file again
adds only the new messages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from importers.transcripts.common import (
    MALFORMED,
    AgentCompaction,
    Line,
    Parsed,
    ParsedConversation,
)

AGENT = "gemini"
PROJECT_ROOT_FILE = ".project_root"  # in ~/.gemini/tmp/<project>/: the project's path
PROJECTS_FILE = "projects.json"  # ~/.gemini/projects.json: {"projects": {path: folder}}
_SYSTEM_TYPES = {"info", "error", "warning"}
_RUNNING = {"scheduled", "validating", "executing", "awaiting_approval"}
_INJECTED = ("<session_context>",)  # 0.61: the first user message, set by Gemini CLI


def _content_parts(content: Any) -> list[dict]:
    if isinstance(content, str):
        return (
            [{"part_type": "text", "text_content": content, "metadata": {"block": "string"}}]
            if content
            else []
        )
    if not isinstance(content, list):
        return (
            []
            if content is None
            else [{"part_type": "text", "metadata": {"unknown_block": content}}]
        )
    parts = []
    for piece in content:
        if isinstance(piece, str):
            parts.append(
                {"part_type": "text", "text_content": piece, "metadata": {"block": "string"}}
            )
        elif isinstance(piece, dict) and isinstance(piece.get("text"), str):
            parts.append(
                {"part_type": "text", "text_content": piece["text"], "metadata": {"block": "text"}}
            )
        elif isinstance(piece, dict) and isinstance(piece.get("inlineData"), dict):
            data = piece["inlineData"]
            parts.append(
                {
                    "part_type": "file",
                    "file_mime": data.get("mimeType"),
                    "file_url": f"data:{data.get('mimeType')};base64,{data.get('data', '')}",
                    "metadata": {"block": "inlineData"},
                }
            )
        elif isinstance(piece, dict) and isinstance(piece.get("fileData"), dict):
            data = piece["fileData"]
            parts.append(
                {
                    "part_type": "file",
                    "file_mime": data.get("mimeType"),
                    "file_url": data.get("fileUri"),
                    "metadata": {"block": "fileData"},
                }
            )
        elif isinstance(piece, dict) and isinstance(piece.get("functionResponse"), dict):
            response = piece["functionResponse"]
            parts.append(
                {
                    "part_type": "tool",
                    "tool_call_id": str(response.get("id") or ""),
                    "tool_name": response.get("name"),
                    "tool_output": _response_text(response.get("response")),
                    "metadata": {"block": "functionResponse"},
                }
            )
        else:
            parts.append({"part_type": "text", "metadata": {"unknown_block": piece}})
    return [{k: v for k, v in p.items() if v is not None} for p in parts]


def _response_text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "error"):
            if isinstance(response.get(key), str):
                return response[key]
    if isinstance(response, str):
        return response
    return json.dumps(response, ensure_ascii=False)


def _tool_part(call: dict) -> dict:
    outputs = [
        r["functionResponse"].get("response")
        for r in call.get("result") or []
        if isinstance(r, dict) and isinstance(r.get("functionResponse"), dict)
    ]
    known = {"id", "name", "args", "result", "status"}
    part: dict[str, Any] = {
        "part_type": "tool",
        "tool_call_id": str(call.get("id") or ""),
        "tool_name": call.get("name") or "",
        "tool_input": call.get("args") if call.get("args") is not None else {},
        "metadata": {
            "block": "toolCall",
            "extra": {k: v for k, v in call.items() if k not in known},
        },
    }
    if outputs:
        part["tool_output"] = "\n".join(_response_text(o) for o in outputs)
    if isinstance(call.get("status"), str):
        part["tool_status"] = call["status"]
    if call.get("status") == "error" and outputs:
        part["tool_error"] = part["tool_output"]
    return part


def _gemini_parts(message: dict) -> list[dict]:
    parts = []
    for thought in message.get("thoughts") or []:
        if isinstance(thought, dict):
            text = "\n".join(
                t
                for t in (thought.get("subject"), thought.get("description"))
                if isinstance(t, str)
            )
            parts.append(
                {
                    "part_type": "reasoning",
                    "text_content": text,
                    "metadata": {"block": "thought", "thought": thought},
                }
            )
    parts.extend(_content_parts(message.get("content")))
    parts.extend(_tool_part(c) for c in message.get("toolCalls") or [] if isinstance(c, dict))
    return parts


@dataclass
class _Compression:
    """Gemini replaced its context (`$set.messages`): the messages it brought in (its
    summary, its acknowledgement) and those it dropped (by message id)."""

    added: list[str]
    replaced: list[str]
    line: int


@dataclass
class _Log:
    """What the JSONL log says once read: a metadata line, message records (a later record
    with the same `id` rewrites it), `{"$set": {...}}` patches (of metadata; of `messages`
    when Gemini replaces its context) and `{"$rewindTo": id}` markers."""

    parsed: Parsed
    header: dict = field(default_factory=dict)
    by_id: dict[str, tuple[tuple[int, int], int, Any]] = field(default_factory=dict)
    loose: list[tuple[tuple[int, int], int, Any]] = field(default_factory=list)
    rewound: set[str] = field(default_factory=set)
    dropped: set[str] = field(default_factory=set)  # left Gemini's context in a `$set`
    compressions: list[_Compression] = field(default_factory=list)

    def read(self, line: Line) -> None:
        item = line.value
        if not isinstance(item, dict):
            self.loose.append(((line.number, 0), line.number, item))
        elif isinstance(item.get("$rewindTo"), str):
            self.rewind(item["$rewindTo"])
        elif isinstance(item.get("$set"), dict):
            patch = item["$set"]
            if "messages" in patch:
                self.replace(patch["messages"], line.number)
            self.header.update({k: v for k, v in patch.items() if k != "messages"})
        elif isinstance(item.get("id"), str) and "type" in item:
            first = self.by_id.get(item["id"], ((line.number, 0), line.number, None))[0]
            self.by_id[item["id"]] = (first, line.number, item)  # a later line rewrites it
            self.rewound.discard(item["id"])
            self.dropped.discard(item["id"])
        elif "sessionId" in item:
            self.header.update({k: v for k, v in item.items() if k != "messages"})
            for position, message in enumerate(item.get("messages") or []):
                self.loose.append(((line.number, position), line.number, message))
        else:
            self.loose.append(((line.number, 0), line.number, item))

    def in_order(self) -> list[str]:
        return sorted(self.by_id, key=lambda k: self.by_id[k][0])

    def rewind(self, target: str) -> None:
        """The user rewound to that message: it and what followed left Gemini's view."""
        order = self.in_order()
        if target in order:
            self.rewound.update(order[order.index(target) :])

    def replace(self, messages: Any, number: int) -> None:
        """Gemini's context is now `messages` (compression, a rolled-back turn, masking).
        Every message already read is kept as it was first written; the ones new here (a
        compression's summary and acknowledgement) are added at this line."""
        if not isinstance(messages, list):
            self.parsed.skip("$set.messages that is not a list")
            return
        kept = {m["id"] for m in messages if isinstance(m, dict) and isinstance(m.get("id"), str)}
        view = [k for k in self.in_order() if k not in self.rewound and k not in self.dropped]
        added = []
        for position, message in enumerate(messages):
            ident = message.get("id") if isinstance(message, dict) else None
            if isinstance(ident, str) and ident not in self.by_id:
                self.by_id[ident] = ((number, position), number, message)
                added.append(ident)
        replaced = [k for k in view if k not in kept]
        self.dropped.update(replaced)
        if added and replaced:
            self.compressions.append(_Compression(added, replaced, number))
        else:
            self.parsed.skip("$set.messages (Gemini's own context replaced; history kept)")

    def records(self) -> list[tuple[int, Any]]:
        ordered = sorted(self.loose + list(self.by_id.values()), key=lambda x: x[0])
        return [(number, message) for _, number, message in ordered]


def _records(
    value: Any, lines: list[Line] | None, parsed: Parsed
) -> tuple[dict, list[tuple[int, Any]], _Log | None]:
    """(session fields, [(line or position, message)], the JSONL log read) of the JSON
    document or of the JSONL log."""
    if lines is None:
        if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
            return {}, [], None
        header = {k: v for k, v in value.items() if k != "messages"}
        return header, list(enumerate(value["messages"], start=1)), None
    log = _Log(parsed)
    for line in lines:
        log.read(line)
    return log.header, log.records(), log


def _facts(header: dict) -> dict[str, Any]:
    facts: dict[str, Any] = {"agent": AGENT, "line": "main"}
    for key in ("projectHash", "kind", "startTime", "lastUpdated", "directories"):
        if header.get(key) is not None:
            facts[key] = header[key]
    directories = header.get("directories")
    if isinstance(directories, list) and directories and isinstance(directories[0], str):
        facts["cwd"] = directories[0]  # newer Gemini CLI names the workspace folders
    facts["started_at"] = header.get("startTime")
    facts["ended_at"] = header.get("lastUpdated")
    return facts


def _role_and_parts(message: dict, parsed: Parsed) -> tuple[str, list[dict]] | None:
    """The role and parts of one message; None (counted) when it is not imported now."""
    kind = message.get("type")
    if kind == "gemini":
        calls = message.get("toolCalls") or []
        if any(isinstance(c, dict) and c.get("status") in _RUNNING for c in calls):
            parsed.skip("gemini message with tool calls still running (left for the next import)")
            return None
        role, parts = "assistant", _gemini_parts(message)
    elif kind == "user":
        parts = _content_parts(message.get("content"))
        role = "tool" if parts and all(p["part_type"] == "tool" for p in parts) else "user"
        for part in parts:  # the context Gemini CLI writes itself, not typed by the user
            if (part.get("text_content") or "").startswith(_INJECTED):
                part["is_synthetic"] = True
    elif kind in _SYSTEM_TYPES:
        role, parts = "system", _content_parts(message.get("content"))
    else:
        parsed.skip(f"message:{kind}")
        return None
    if not parts:
        parsed.skip(f"empty {kind} message")
        return None
    return role, parts


def parse(
    document: Any, *, session_id: str | None, default_session: str, lines: list[Line] | None = None
) -> Parsed:
    parsed = Parsed()
    header, messages, log = _records(document, lines, parsed)
    if not header and not messages:
        parsed.error(None, "expected a Gemini CLI chat record: an object with 'messages'")
        return parsed
    own = header.get("sessionId") if isinstance(header.get("sessionId"), str) else None
    session = session_id or own or default_session
    source_session = own or session
    conversation = ParsedConversation(session_id=session, title=_title(header))
    facts = _facts(header)
    rewound = log.rewound if log is not None else set()
    summaries = _summary_ids(log)
    texts: dict[str, str] = {}
    answered: dict[str, str] = {}  # tool call id -> the output stored on the call
    for position, message in messages:
        raw = _raw_message(position, message, parsed, rewound, summaries)
        if raw is None or _repeats_results(raw, answered, parsed):
            continue
        if raw["role"] == "assistant" and isinstance(message.get("model"), str):
            facts["model"] = message["model"]
        ident = message.get("id") if isinstance(message.get("id"), str) else None
        if ident is not None:
            texts[ident] = "\n".join(
                p.get("text_content") or "" for p in raw["parts"] if p["part_type"] == "text"
            )
        ident = ident or f"position:{position}"
        raw["external_id"] = f"gemini:{source_session}:{ident}"
        conversation.messages.append((position, raw))
    conversation.metadata = {k: v for k, v in facts.items() if v is not None}
    if log is not None:
        conversation.compactions = _compactions(log, summaries, texts, source_session)
    parsed.add(conversation)
    return parsed


def _raw_message(
    position: int, message: Any, parsed: Parsed, rewound: set[str], summaries: dict[str, str]
) -> dict | None:
    if not isinstance(message, dict):
        parsed.error(position, "a message must be a JSON object")
        return None
    try:
        found = _role_and_parts(message, parsed)
    except MALFORMED as error:
        parsed.error(position, f"a message that could not be read: {error}")
        return None
    if found is None:
        return None
    role, parts = found
    meta = parts[0].setdefault("metadata", {})
    meta["gemini_type"] = message.get("type")
    ident = message.get("id") if isinstance(message.get("id"), str) else None
    if ident in rewound:
        meta["rewound"] = True  # kept: the user rewound past it, it was still said
    if ident in summaries:  # brought in when Gemini compressed its context
        meta["compression"] = summaries[ident]
    meta["source"] = {
        k: message[k] for k in ("id", "model", "tokens") if message.get(k) is not None
    }
    return {"role": role, "parts": parts, "created_at": message.get("timestamp")}


def _repeats_results(raw: dict, answered: dict[str, str], parsed: Parsed) -> bool:
    """Gemini CLI (0.61) writes a tool's result on its call (`toolCalls[].result`) and
    again as the user message that sends it back to the model. The repeat is counted, not
    stored, when every result in it is already stored, word for word, on its call."""
    tools = [p for p in raw["parts"] if p["part_type"] == "tool"]
    if raw["role"] == "assistant":
        answered.update(
            (p["tool_call_id"], p["tool_output"])
            for p in tools
            if p.get("tool_call_id") and "tool_output" in p
        )
        return False
    if raw["role"] != "tool" or not all(
        p.get("tool_call_id") in answered and answered[p["tool_call_id"]] == p.get("tool_output")
        for p in tools
    ):
        return False
    parsed.skip("tool results repeated from their calls")
    return True


def _summary_ids(log: _Log | None) -> dict[str, str]:
    """Per message a compression brought in: "summary" (the first user message: Gemini's
    `<state_snapshot>`) or "added" (its acknowledgement and anything else new)."""
    roles: dict[str, str] = {}
    for compression in log.compressions if log is not None else []:
        summary = _summary_of(log, compression)
        for ident in compression.added:
            roles[ident] = "summary" if ident == summary else "added"
    return roles


def _summary_of(log: _Log, compression: _Compression) -> str:
    users = [i for i in compression.added if (log.by_id[i][2] or {}).get("type") == "user"]
    return (users or compression.added)[0]


def _compactions(
    log: _Log, summaries: dict[str, str], texts: dict[str, str], session: str
) -> list[AgentCompaction]:
    """Each compression as an agent compaction: its summary over the messages it dropped
    from Gemini's context (linked like Claude Code's, agent_compactions.py)."""
    found = []
    for compression in log.compressions:
        summary = _summary_of(log, compression)
        found.append(
            AgentCompaction(
                summary=texts.get(summary, ""),
                covered=[f"gemini:{session}:{i}" for i in compression.replaced],
                at_external_id=f"gemini:{session}:{summary}",
                author=AGENT,
                metadata={"trigger": "$set.messages", "line": compression.line},
            )
        )
    return found


def _title(header: dict) -> str:
    summary = header.get("summary")
    return summary if isinstance(summary, str) else ""


def project_folder(path: Path) -> Path | None:
    """`~/.gemini/tmp/<project>` of a session file in its `chats/` (or of a sub-agent's
    log in `chats/<parent session id>/`); None elsewhere."""
    if path.parent.name == "chats":
        return path.parent.parent
    if path.parent.parent.name == "chats":
        return path.parent.parent.parent
    return None


def project_root(folder: Path) -> str | None:
    """The project's directory as Gemini CLI keeps it: the folder's `.project_root` file
    (0.40 and later), else the entry of `~/.gemini/projects.json` naming this folder."""
    try:
        root = (folder / PROJECT_ROOT_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        root = ""
    if root:
        return root
    try:
        registry = json.loads((folder.parent.parent / PROJECTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    projects = registry.get("projects") if isinstance(registry, dict) else None
    for directory, name in (projects or {}).items() if isinstance(projects, dict) else ():
        if name == folder.name and isinstance(directory, str):
            return directory
    return None
