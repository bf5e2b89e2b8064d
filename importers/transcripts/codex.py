"""Codex CLI rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`, also
`.jsonl.zst`): one `{timestamp, type, payload}` object per line, read into one conversation.

| line | here |
|---|---|
| session_meta | the first: the conversation's metadata (id, cwd, cli_version, git, originator; a fork's `forked_from_id` or a sub-agent's `source.subagent.thread_spawn.parent_thread_id` as `parent_session`); its `instructions` (or 0.171's `base_instructions`: `{text, provenance}`), if any, a synthetic system message. A later one is a fork's replay of its parent's header (its id in `replayed_sessions`) |
| turn_context | metadata: the model, cwd, policies of each turn (the distinct ones are kept) |
| response_item message | a message of its role; `developer` is system; the injected instructions and `<environment_context>` user items are marked synthetic |
| response_item reasoning | assistant reasoning part: the summary text (`content` text if present), `encrypted_content` in metadata |
| response_item function_call / custom_tool_call / local_shell_call | assistant tool part: `call_id`, the tool's name as written (`shell`, `shell_command`, `exec_command`, `exec`, `apply_patch`, ...; `metadata.tool_kind` groups the shell ones), the parsed arguments (or the raw input) |
| response_item *_call_output | tool message, tool part with the output text (a list output's text joined, the list kept in metadata), paired on `call_id` |
| response_item web_search_call | assistant tool part `web_search` (its action as input, its status) |
| compacted | system message holding Codex's summary (`message`) with a compaction part (`replacement_history` in metadata), and an agent compaction over the messages since the previous one |
| event_msg token_count | usage: on the assistant message before it, and the last totals on the conversation |
| token_usage_record (0.171) | one response's usage (with `response_id`, `turn_id`) on the assistant message before it; each turn's total in `turn_token_usage`, the thread's in `token_usage` |
| world_state (0.171) | the environment shown to the model, full or changed keys: kept as `world_state` with every change applied (`world_state_records` counts them) |
| event_msg user_message / agent_message / agent_reasoning | repeats of response items: not stored twice (kept only when no response item holds the same text) |
| anything else | counted in the report's notes (`skipped_records`) |

External ids are `codex:<session id>:<line>`: a rollout only grows, so a re-import adds
nothing and an import of a longer rollout adds only its new lines. A fork (`forked_from_id`)
begins by replaying its parent's rollout: `fork_of` says so, and the runner leaves out what
its parent holds already (importers/transcripts/forks.py).
"""

from __future__ import annotations

import json
from typing import Any

from importers.transcripts.blocks import result_text
from importers.transcripts.common import (
    MALFORMED,
    AgentCompaction,
    ForkOf,
    Line,
    Parsed,
    ParsedConversation,
)

AGENT = "codex"
INSTRUCTION_KEYS = ("instructions", "base_instructions")  # session_meta's system prompt
_SHELL_TOOLS = {
    "shell",
    "shell_command",
    "exec_command",
    "exec",
    "local_shell",
    "container.exec",
    "unified_exec",
    "write_stdin",
}
_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}
_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
)
_EVENT_REPEATS = {"user_message": "user", "agent_message": "assistant"}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and "text" in p)
    return ""


def _tool_part(payload: dict, names: dict[str, str]) -> dict:
    kind = payload.get("type")
    call_id = payload.get("call_id") or payload.get("id") or ""
    name = payload.get("name") or ("local_shell" if kind == "local_shell_call" else kind)
    names[call_id] = name
    if kind == "function_call":
        raw = payload.get("arguments")
        try:
            tool_input = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            tool_input = {"arguments": raw}
    elif kind == "custom_tool_call":
        tool_input = {"input": payload.get("input")}
    else:
        tool_input = payload.get("action") or {}
    meta = {"block": kind, "tool_kind": "shell" if name in _SHELL_TOOLS else name}
    extra = {
        k: v
        for k, v in payload.items()
        if k not in ("type", "call_id", "name", "arguments", "input", "action")
    }
    if extra:
        meta["extra"] = extra
    part = {
        "part_type": "tool",
        "tool_call_id": call_id,
        "tool_name": name,
        "tool_input": tool_input if tool_input is not None else {},
        "metadata": meta,
    }
    if isinstance(payload.get("status"), str):
        part["tool_status"] = payload["status"]
    return part


def _output_part(payload: dict, names: dict[str, str]) -> dict:
    output = payload.get("output")
    if isinstance(output, dict) and "content" in output:  # {content, success}
        text, rich = _text_of(output.get("content")), output
    elif isinstance(output, list):  # newer: content items (input_text, input_image, ...)
        text, rich = _text_of(output), output
    else:
        text, rich = result_text(output)
    call_id = payload.get("call_id") or ""
    meta: dict[str, Any] = {"block": payload.get("type")}
    if rich is not None:
        meta["content"] = rich
    part = {
        "part_type": "tool",
        "tool_call_id": call_id,
        "tool_output": text,
        "metadata": meta,
    }
    if names.get(call_id):
        part["tool_name"] = names[call_id]
    return part


def _message_parts(payload: dict) -> tuple[str, list[dict]]:
    role = payload.get("role")
    parts = []
    for piece in payload.get("content") or []:
        if not isinstance(piece, dict):
            continue
        kind = piece.get("type")
        if isinstance(piece.get("text"), str):
            part = {"part_type": "text", "text_content": piece["text"], "metadata": {"block": kind}}
            if role == "user" and piece["text"].lstrip().startswith(_INJECTED):
                part["is_synthetic"] = True
            parts.append(part)
        elif kind == "input_image" and piece.get("image_url"):
            parts.append(
                {"part_type": "file", "file_url": piece["image_url"], "metadata": {"block": kind}}
            )
        else:
            parts.append({"part_type": "text", "metadata": {"unknown_block": piece}})
    if role in ("developer", "system"):
        for part in parts:
            part["is_synthetic"] = True
            part["metadata"]["role"] = role
        role = "system"
    return (role if role in ("user", "assistant", "system") else "user"), parts


def _reasoning(payload: dict) -> dict:
    texts = [_text_of([s]) for s in payload.get("summary") or []]
    content = _text_of(payload.get("content"))
    meta: dict[str, Any] = {"block": "reasoning"}
    if payload.get("encrypted_content"):
        meta["encrypted_content"] = payload["encrypted_content"]
    if content:
        meta["summary"] = "\n".join(texts)
    return {
        "part_type": "reasoning",
        "text_content": content or "\n".join(texts),
        "metadata": meta,
    }


class _Reader:
    def __init__(self, session_id: str | None, default_session: str):
        self.parsed = Parsed()
        self.forced_session = session_id
        self.default_session = default_session
        self.facts: dict[str, Any] = {"agent": AGENT}
        self.messages: list[tuple[int, dict]] = []
        self.names: dict[str, str] = {}
        self.item_texts: set[tuple[str, str]] = set()
        self.contexts: list[dict] = []
        self.compactions: list[tuple[int, dict]] = []
        self.meta_line: int | None = None  # the file's own session_meta (the first one)
        self.usage_records = False  # 0.171's token_usage_record lines say the totals

    def add(self, line: int, when: Any, role: str, parts: list[dict]) -> dict:
        message = {"role": role, "parts": parts, "created_at": when, "line": line}
        self.messages.append((line, message))
        return message

    def session_meta(self, line: int, when: Any, payload: dict) -> None:
        if self.meta_line is not None:  # a fork's replay of its parent: the parent's header
            ident = payload.get("id") or payload.get("session_id")
            self.facts.setdefault("replayed_sessions", []).append(ident)
            self.instructions(line, when, payload)
            return
        self.meta_line = line
        meta = {k: v for k, v in payload.items() if k not in INSTRUCTION_KEYS}
        self.facts["session_meta"] = meta
        ident = payload.get("id") or payload.get("session_id")
        if isinstance(ident, str) and ident:
            self.facts.setdefault("session", ident)
        for key, name in (("cwd", "cwd"), ("cli_version", "agent_version")):
            if isinstance(payload.get(key), str):
                self.facts[name] = payload[key]
        git = payload.get("git") or {}
        if isinstance(git, dict) and git.get("branch"):
            self.facts["git_branch"] = git["branch"]
        if isinstance(payload.get("timestamp"), str):
            self.facts.setdefault("started_at", payload["timestamp"])
        self.instructions(line, when, payload)

    def instructions(self, line: int, when: Any, payload: dict) -> None:
        """The system prompt the header carries: `instructions` (a string, up to 0.1xx) or
        `base_instructions` (0.171: `{text, provenance}`; a plain string is read too)."""
        for key in INSTRUCTION_KEYS:
            value = payload.get(key)
            extra = (
                {k: v for k, v in value.items() if k != "text"} if isinstance(value, dict) else {}
            )
            text = value.get("text") if isinstance(value, dict) else value
            if isinstance(text, str) and text.strip():
                part = {
                    "part_type": "text",
                    "text_content": text,
                    "is_synthetic": True,
                    "metadata": {"block": f"session_meta.{key}", **extra},
                }
                self.add(line, when, "system", [part])
                return

    def world_state(self, payload: dict) -> None:
        """0.171: the environment the model is shown (dates, cwd, tools, skills, ...), a
        full state or only what changed; kept with every change applied, and counted."""
        state = payload.get("state")
        if not isinstance(state, dict):
            self.parsed.skip("world_state without a state")
            return
        current = {} if payload.get("full") else dict(self.facts.get("world_state") or {})
        current.update(state)
        self.facts["world_state"] = current
        self.facts["world_state_records"] = self.facts.get("world_state_records", 0) + 1

    def token_usage_record(self, payload: dict) -> None:
        """0.171: one model response's usage, with the turn's and the thread's totals so far.
        The response's goes on the assistant message before it (the last the response
        wrote), each turn's last total in `turn_token_usage`, the thread's in `token_usage`."""
        usage = payload.get("usage")
        last = next((m for _, m in reversed(self.messages) if m["role"] == "assistant"), None)
        if isinstance(usage, dict) and last is not None:
            meta = last["parts"][0]["metadata"]
            meta["usage"] = usage
            meta.update({k: payload[k] for k in ("response_id", "turn_id") if payload.get(k)})
        turn, turn_usage = payload.get("turn_id"), payload.get("turn_token_usage")
        if isinstance(turn, str) and isinstance(turn_usage, dict):
            self.facts.setdefault("turn_token_usage", {})[turn] = turn_usage
        if isinstance(payload.get("thread_token_usage"), dict):
            self.facts["token_usage"] = payload["thread_token_usage"]
            self.usage_records = True

    def turn_context(self, payload: dict) -> None:
        if isinstance(payload.get("model"), str):
            self.facts["model"] = payload["model"]
        if isinstance(payload.get("cwd"), str):
            self.facts["cwd"] = payload["cwd"]
        if payload not in self.contexts:
            self.contexts.append(payload)

    def response_item(self, line: int, when: Any, payload: dict) -> None:
        kind = payload.get("type")
        if kind == "message":
            role, parts = _message_parts(payload)
            if parts:
                self.add(line, when, role, parts)
        elif kind == "reasoning":
            self.add(line, when, "assistant", [_reasoning(payload)])
        elif kind in _CALLS:
            self.add(line, when, "assistant", [_tool_part(payload, self.names)])
        elif kind in _OUTPUTS:
            self.add(line, when, "tool", [_output_part(payload, self.names)])
        elif kind == "web_search_call":
            call_id = payload.get("id") or f"web_search:{line}"
            part = _tool_part(dict(payload, name="web_search", call_id=call_id), self.names)
            part["metadata"]["self_contained"] = True  # no separate output item
            if not payload.get("id"):
                part["metadata"]["call_id_from_line"] = True  # not what it says (forks.py)
            self.add(line, when, "assistant", [part])
        else:
            self.parsed.skip(f"response_item:{kind}")

    def event(self, line: int, payload: dict) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            info = payload.get("info") or {}
            if info.get("total_token_usage") and not self.usage_records:
                self.facts["token_usage"] = info["total_token_usage"]
            usage = info.get("last_token_usage")
            last = next((m for _, m in reversed(self.messages) if m["role"] == "assistant"), None)
            if usage and last is not None:
                last["parts"][0]["metadata"].setdefault("usage", usage)
            return
        self.parsed.skip(f"event_msg:{kind}")

    def compacted(self, line: int, when: Any, payload: dict) -> None:
        text = payload.get("message") or ""
        meta = {"block": "compacted"}
        if payload.get("replacement_history") is not None:
            meta["replacement_history"] = payload["replacement_history"]
        parts = [{"part_type": "compaction", "is_synthetic": True, "metadata": meta}]
        if text:
            parts.append(
                {"part_type": "text", "text_content": text, "metadata": {"block": "compacted"}}
            )
        message = self.add(line, when, "system", parts)
        message["compaction"] = text


def parse(lines: list[Line], *, session_id: str | None, default_session: str) -> Parsed:
    reader = _Reader(session_id, default_session)
    events: list[tuple[int, Any, dict]] = []
    for line in lines:
        record = line.value
        if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
            reader.parsed.error(line.number, "a rollout line must be an object with a payload")
            continue
        try:
            _read_line(reader, events, line.number, record)
        except MALFORMED as error:
            reader.parsed.error(line.number, f"a line that could not be read: {error}")
    _events_without_items(reader, events)
    return _finish(reader)


def _read_line(reader: _Reader, events: list, number: int, record: dict) -> None:
    kind, payload, when = record.get("type"), record["payload"], record.get("timestamp")
    if isinstance(when, str):
        reader.facts.setdefault("started_at", when)
        reader.facts["ended_at"] = when
    if kind == "session_meta":
        reader.session_meta(number, when, payload)
    elif kind == "turn_context":
        reader.turn_context(payload)
    elif kind == "response_item":
        reader.response_item(number, when, payload)
        if payload.get("type") == "message":
            reader.item_texts.add((payload.get("role"), _text_of(payload.get("content"))))
    elif kind == "event_msg":
        if payload.get("type") in _EVENT_REPEATS:
            events.append((number, when, payload))
        else:
            reader.event(number, payload)
    elif kind == "compacted":
        reader.compacted(number, when, payload)
    elif kind == "world_state":
        reader.world_state(payload)
    elif kind == "token_usage_record":
        reader.token_usage_record(payload)
    else:
        reader.parsed.skip(str(kind))


def _events_without_items(reader: _Reader, events: list) -> None:
    """Older rollouts hold some prompts and answers only as events: keep those."""
    for number, when, payload in events:
        role = _EVENT_REPEATS[payload["type"]]
        text = payload.get("message") or ""
        if not isinstance(text, str):
            reader.parsed.error(number, f"a {payload['type']} event whose message is no text")
            continue
        if (role, text) in reader.item_texts or not text.strip():
            reader.parsed.skip(f"event_msg:{payload['type']} (repeat)")
            continue
        part = {"part_type": "text", "text_content": text, "metadata": {"block": payload["type"]}}
        reader.add(number, when, role, [part])
    reader.messages.sort(key=lambda item: item[0])


def _finish(reader: _Reader) -> Parsed:
    facts = reader.facts
    session = reader.forced_session or facts.get("session") or reader.default_session
    conversation = ParsedConversation(session_id=session)
    since: list[str] = []
    for line, message in reader.messages:
        message.pop("line", None)
        summary = message.pop("compaction", None)
        external_id = f"codex:{facts.get('session') or session}:{line}"
        message["external_id"] = external_id
        if summary is not None:
            conversation.compactions.append(
                AgentCompaction(
                    summary=summary, covered=since, at_external_id=external_id, author=AGENT
                )
            )
            since = []
        conversation.messages.append((line, message))
        since.append(external_id)
    meta = {k: v for k, v in facts.items() if k != "session"}
    meta["turn_contexts"] = reader.contexts
    meta["line"] = "main"
    session_meta = facts.get("session_meta") or {}
    spawn = (
        (session_meta.get("source") or {}) if isinstance(session_meta.get("source"), dict) else {}
    )
    parent = ((spawn.get("subagent") or {}).get("thread_spawn") or {}).get("parent_thread_id")
    if parent:  # a sub-agent's rollout names the session that spawned it
        meta.update(parent_session=parent, line="subagent")
    elif session_meta.get("forked_from_id"):
        meta.update(parent_session=session_meta["forked_from_id"], line="fork")
    forked_from = session_meta.get("forked_from_id")
    if isinstance(forked_from, str) and forked_from:  # its file begins with the parent's
        conversation.fork_of = ForkOf(forked_from, replay_after_line=reader.meta_line or 0)
    conversation.metadata = meta
    reader.parsed.add(conversation)
    return reader.parsed
