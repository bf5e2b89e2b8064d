"""OpenCode sessions, from any of its three stores:

* `opencode.db` (SQLite, 1.2 and later): tables `session`, `message` and `part`, the
  record in a JSON `data` column that does not repeat the ids (taken from the row's
  columns). Opened read-only; the agent may be writing it.
* the older `storage/` tree: `storage/session/<project>/<session>.json`,
  `storage/message/<session>/<message>.json`, `storage/part/<message>/<part>.json`.
* `opencode export <id>` output: `{info, messages: [{info, parts}]}`.

Each session is one conversation (its `ses_...` id); a sub-task session names its parent
(`parentID`) in the metadata. Parts map one to one:

| part | here |
|---|---|
| text | text (`synthetic` and `ignored` kept) |
| reasoning | reasoning |
| tool | ONE tool part: `callID`, `tool`, `state.status`, `state.input`, `state.output`, `state.error`, `state.title` (the rest of the state in metadata) |
| step-start, step-finish | step_start (snapshot), step_finish (reason, cost, tokens) |
| file, patch, snapshot, agent, subtask, retry | the part type of the same name |
| compaction | compaction part; the assistant message after it marked `summary: true` (mode or agent `compaction`) holds OpenCode's summary, an agent compaction over the messages since the previous one |
| anything else | a text part keeping the whole part in `metadata.unknown_block` |

The last assistant message of a session that is not completed and was started less than an
hour ago is left for the next import (so it is stored once, whole); an older unfinished
one (the agent was stopped) is imported as it is. External ids are `opencode:<message id>`. Times are
epoch milliseconds.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from importers.transcripts.common import MALFORMED, AgentCompaction, Parsed, ParsedConversation

AGENT = "opencode"


def _iso(ms: Any) -> str | None:
    if isinstance(ms, int | float) and not isinstance(ms, bool):
        return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()
    return None


# -- reading the three stores into [(session info, [(message info, [part])])] -----------


def _load(text: str, where: str, parsed: Parsed) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError as error:
        parsed.error(None, f"{where}: not valid JSON: {error}")
        return None
    return value if isinstance(value, dict) else None


def read_database(path: Path, parsed: Parsed) -> list[tuple[dict, list]]:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        sessions = []
        columns = [c[1] for c in connection.execute("PRAGMA table_info(session)")]
        for row in connection.execute("SELECT * FROM session ORDER BY time_created, id"):
            info = dict(zip(columns, row, strict=True))
            info["parentID"] = info.pop("parent_id", None)
            info["time"] = {
                "created": info.get("time_created"),
                "updated": info.get("time_updated"),
            }
            if isinstance(info.get("model"), str):
                info["model"] = _load(info["model"], "session.model", parsed) or info["model"]
            sessions.append((info, []))
        by_session = {info["id"]: messages for info, messages in sessions}
        by_message: dict[str, list] = {}
        for ident, session_id, data in connection.execute(
            "SELECT id, session_id, data FROM message ORDER BY time_created, id"
        ):
            info = _load(data, f"message {ident}", parsed)
            if info is None or session_id not in by_session:
                continue
            info.update(id=ident, sessionID=session_id)
            by_message[ident] = []
            by_session[session_id].append((info, by_message[ident]))
        for ident, message_id, data in connection.execute(
            "SELECT id, message_id, data FROM part ORDER BY message_id, id"
        ):
            part = _load(data, f"part {ident}", parsed)
            if part is not None and message_id in by_message:
                part.update(id=ident, messageID=message_id)
                by_message[message_id].append(part)
        return sessions
    finally:
        connection.close()


def read_storage(root: Path, parsed: Parsed) -> list[tuple[dict, list]]:
    storage = root / "storage" if (root / "storage").is_dir() else root
    sessions = []
    for session_file in sorted((storage / "session").glob("*/*.json")):
        info = _load(
            session_file.read_text(encoding="utf-8", errors="replace"), str(session_file), parsed
        )
        if info is None:
            continue
        info.setdefault("id", session_file.stem)
        messages = []
        for message_file in sorted((storage / "message" / info["id"]).glob("*.json")):
            message = _load(
                message_file.read_text(encoding="utf-8", errors="replace"),
                str(message_file),
                parsed,
            )
            if message is None:
                continue
            message.setdefault("id", message_file.stem)
            parts = []
            for part_file in sorted((storage / "part" / message["id"]).glob("*.json")):
                part = _load(
                    part_file.read_text(encoding="utf-8", errors="replace"), str(part_file), parsed
                )
                if part is not None:
                    parts.append(part)
            messages.append((message, parts))
        messages.sort(key=lambda m: ((m[0].get("time") or {}).get("created") or 0, m[0]["id"]))
        sessions.append((info, messages))
    return sessions


def read_export(document: Any, parsed: Parsed) -> list[tuple[dict, list]]:
    if not isinstance(document, dict) or not isinstance(document.get("messages"), list):
        parsed.error(None, "expected `opencode export` output: an object with info and messages")
        return []
    messages = []
    for number, item in enumerate(document["messages"], start=1):
        if not isinstance(item, dict) or not isinstance(item.get("info"), dict):
            parsed.error(number, "a message must be an object with info and parts")
            continue
        parts = item.get("parts") if isinstance(item.get("parts"), list) else []
        messages.append((item["info"], [p for p in parts if isinstance(p, dict)]))
    return [(document.get("info") or {}, messages)]


# -- parts --------------------------------------------------------------------------


def _tool(part: dict) -> dict:
    state = part.get("state") or {}
    known = {"status", "input", "output", "error", "title"}
    out = {
        "part_type": "tool",
        "tool_call_id": part.get("callID") or part.get("id") or "",
        "tool_name": part.get("tool") or "",
        "tool_status": state.get("status"),
        "tool_input": state.get("input") if state.get("input") is not None else {},
        "tool_output": state.get("output") if isinstance(state.get("output"), str) else None,
        "tool_error": state.get("error") if isinstance(state.get("error"), str) else None,
        "tool_title": state.get("title") or None,
        "metadata": {"state": {k: v for k, v in state.items() if k not in known}},
    }
    return out


def _step_finish(part: dict) -> dict:
    tokens = part.get("tokens") or {}
    return {
        "part_type": "step_finish",
        "step_reason": part.get("reason"),
        "step_cost": part.get("cost"),
        "step_tokens_in": tokens.get("input"),
        "step_tokens_out": tokens.get("output"),
        "snapshot_hash": part.get("snapshot"),
        "metadata": {"tokens": tokens},
    }


# One OpenCode part type -> its raw part dict, in the order of the module docstring's table.
_PART_MAPS = {
    "text": lambda part: {
        "part_type": "text",
        "text_content": part.get("text") or "",
        "is_synthetic": part.get("synthetic"),
        "is_ignored": part.get("ignored"),
    },
    "reasoning": lambda part: {"part_type": "reasoning", "text_content": part.get("text") or ""},
    "tool": _tool,
    "step-start": lambda part: {"part_type": "step_start", "snapshot_hash": part.get("snapshot")},
    "step-finish": _step_finish,
    "file": lambda part: {
        "part_type": "file",
        "file_mime": part.get("mime"),
        "file_name": part.get("filename"),
        "file_url": part.get("url"),
    },
    "patch": lambda part: {
        "part_type": "patch",
        "patch_hash": part.get("hash"),
        "patch_files": part.get("files"),
    },
    "snapshot": lambda part: {"part_type": "snapshot", "snapshot_hash": part.get("snapshot")},
    "subtask": lambda part: {
        "part_type": "subtask",
        "subtask_prompt": part.get("prompt"),
        "subtask_desc": part.get("description"),
        "subtask_agent": part.get("agent"),
    },
    "agent": lambda part: {"part_type": "agent", "text_content": part.get("name")},
    "retry": lambda part: {"part_type": "retry"},
    "compaction": lambda part: {
        "part_type": "compaction",
        "compaction_auto": part.get("auto"),
        "is_synthetic": True,
    },
}


def _map_part(part: dict) -> dict:
    """One OpenCode part as a raw part dict (an unknown type is kept whole)."""
    kind = part.get("type")
    mapper = _PART_MAPS.get(kind) if isinstance(kind, str) else None
    if mapper is None:
        return {"part_type": "text", "metadata": {"unknown_block": part}}
    out = mapper(part)
    out.setdefault("metadata", {})
    out["metadata"].update(
        {
            "block": kind,
            "opencode": {k: v for k, v in part.items() if k in ("id", "time", "metadata")},
        }
    )
    return {k: v for k, v in out.items() if v is not None}


# -- sessions to conversations ------------------------------------------------------


def _facts(info: dict, messages: list) -> dict:
    facts: dict[str, Any] = {"agent": AGENT, "line": "main"}
    for key, name in (("directory", "cwd"), ("version", "agent_version"), ("slug", "slug")):
        if isinstance(info.get(key), str) and info[key]:
            facts[name] = info[key]
    model = info.get("model")
    if isinstance(model, dict):
        model = model.get("id") or model.get("modelID")
    for message, _ in messages:
        if isinstance(message.get("modelID"), str):
            model = message["modelID"]
        path = message.get("path") or {}
        if isinstance(path.get("cwd"), str) and "cwd" not in facts:
            facts["cwd"] = path["cwd"]
    if isinstance(model, str):
        facts["model"] = model
    if isinstance(info.get("agent"), str):
        facts["opencode_agent"] = info["agent"]
    time = info.get("time") or {}
    facts["started_at"] = _iso(time.get("created"))
    facts["ended_at"] = _iso(time.get("updated"))
    if info.get("parentID"):
        facts["parent_session"] = info["parentID"]
        facts["line"] = "subtask"
    facts["project_id"] = info.get("projectID") or info.get("project_id")
    return {k: v for k, v in facts.items() if v is not None}


_STILL_WRITING_MS = 3600 * 1000  # an unfinished answer this recent may still be written


def _unfinished(message: dict, now_ms: float) -> bool:
    """An answer the agent may still be writing: not completed, no error, recent. An old
    unfinished one (the agent was stopped) is imported as it is."""
    time = message.get("time") if isinstance(message.get("time"), dict) else {}
    if message.get("role") != "assistant" or time.get("completed") or message.get("error"):
        return False
    created = time.get("created")
    return not isinstance(created, int | float) or now_ms - created < _STILL_WRITING_MS


def to_parsed(sessions: list[tuple[dict, list]], *, session_id: str | None) -> Parsed:
    parsed = Parsed()
    for info, messages in sessions:
        ident = info.get("id") or (messages[0][0].get("sessionID") if messages else None)
        if not ident:
            parsed.error(None, "a session without an id")
            continue
        name = session_id if session_id and len(sessions) == 1 else ident
        title = info.get("title") if isinstance(info.get("title"), str) else ""
        conversation = ParsedConversation(session_id=str(name), title=title)
        try:
            conversation.metadata = _facts(info, messages)
        except MALFORMED as error:
            parsed.error(None, f"session {ident}: its facts could not be read: {error}")
            conversation.metadata = {"agent": AGENT, "line": "main"}
        messages = [m for m in messages if isinstance(m[0], dict) and isinstance(m[1], list)]
        if messages and _unfinished(messages[-1][0], datetime.now(tz=UTC).timestamp() * 1000):
            messages = messages[:-1]
            parsed.skip("assistant message still being written (left for the next import)")
        _add_messages(conversation, messages, parsed)
        parsed.add(conversation)
    return parsed


def _add_messages(conversation: ParsedConversation, messages: list, parsed: Parsed) -> None:
    since: list[str] = []  # external ids since the last OpenCode compaction
    for position, (info, parts) in enumerate(messages, start=1):
        try:
            message = _message(info, parts)
        except MALFORMED as error:
            parsed.error(position, f"message {info.get('id')}: could not be read: {error}")
            continue
        external_id = message["external_id"]
        is_summary = info.get("summary") is True or "compaction" in (
            info.get("mode"),
            info.get("agent"),
        )
        if is_summary and message["role"] == "assistant":
            text = "\n".join(
                p["text_content"]
                for p in message["parts"]
                if p["part_type"] == "text" and isinstance(p.get("text_content"), str)
            )
            covered = list(since)
            # The user message holding the compaction part asked for it: not summarised.
            if covered and conversation.messages and _asks_compaction(conversation.messages[-1][1]):
                covered = covered[:-1]
            conversation.compactions.append(
                AgentCompaction(
                    summary=text, covered=covered, at_external_id=external_id, author=AGENT
                )
            )
            since = []
        conversation.messages.append((position, message))
        since.append(external_id)


def _message(info: dict, parts: list) -> dict:
    mapped = [_map_part(p) for p in parts]
    role = info.get("role") if info.get("role") in ("user", "assistant") else "user"
    if not mapped:
        mapped = [{"part_type": "text", "metadata": {"empty_message": True}}]
    source = {k: v for k, v in info.items() if k not in ("id", "sessionID", "role")}
    mapped[0]["metadata"]["source"] = source
    created = info.get("time") or {}
    return {
        "role": role,
        "parts": mapped,
        "created_at": _iso(created.get("created") if isinstance(created, dict) else None),
        "external_id": f"opencode:{info.get('id')}",
    }


def _asks_compaction(message: dict) -> bool:
    return any(p["part_type"] == "compaction" for p in message["parts"])
