"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`).

One JSON record per line. `user` and `assistant` records carry an Anthropic `message`
(content blocks: text, thinking, tool_use, tool_result, image); every record with a `uuid`
has a `parentUuid`, so the records form a tree. How that tree maps onto conversations:

* Every record with a uuid is a node of the tree, whatever its type: Claude Code 2.x puts
  `attachment`, `progress` and other records without conversation content in the chain.
  They stay out of the transcript (counted in the report's notes) but never cut it.
* The main conversation (the transcript's session id, or `--session-id`) holds every
  record that is not on an abandoned branch, in file order: parallel tool calls written
  as sibling records and their results all belong to it.
* A branch is a second *user prompt* under one parent (the user edited or retried a
  prompt): of the prompts under that parent, the one whose records were written last
  continues the main conversation; each other one becomes the conversation
  `<session>:branch:<its prompt uuid>`, holding what came before it and its own records.
  A tool result, an interruption notice or a meta record beside a prompt is no branch.
* Sidechains (`isSidechain` records in the session file, Claude Code 1.x) become one
  conversation per sidechain root, `<session>:sidechain:<its root uuid>`. Sub-agent files
  (`<session>/subagents/agent-<id>.jsonl`, or `agent-<id>.jsonl` beside the session) are
  read by `parse_with_subagents` into `<session>:subagent:<agent id>`, linked to the
  main conversation and to the tool call that started them (metadata).
* A `system` record with subtype `compact_boundary` becomes a `system` message with a
  `compaction` part; the user record after it that holds the compaction summary
  (`isCompactSummary`) is kept as a user message (`metadata.compact_summary: true`) and
  becomes an agent compaction: a summary by claude-code over the messages since the
  previous one (`AgentCompaction`).
* The records of one API response (one content block each, sharing `message.id`) stay
  one message per record, so a growing file imports idempotently; all but the first are
  marked (`metadata.source.same_response_as`, `usage_repeated`) so usage is counted once.
* `summary` and `ai-title` records give the conversation its title.

External ids are `claude-code:<uuid>`, so a re-import adds nothing and an import of a
session that went on adds only the new records.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from importers.transcripts.blocks import blocks_to_parts, role_for
from importers.transcripts.common import (
    MALFORMED,
    AgentCompaction,
    Line,
    Parsed,
    ParsedConversation,
    read_jsonl,
)

AGENT = "claude-code"
_MESSAGE_TYPES = {"user", "assistant", "system"}
_INTERRUPTED = "[Request interrupted"


@dataclass
class _Record:
    line: int
    data: dict
    uuid: str
    parent: str | None
    sidechain: bool
    children: list[str] = field(default_factory=list)


def _parent(data: dict) -> str | None:
    parent = data.get("parentUuid")
    if parent is None and data.get("subtype") == "compact_boundary":
        parent = data.get("logicalParentUuid")
    return parent


def _is_prompt(data: dict) -> bool:
    """A prompt the user typed: a user record with text or files, not only tool results,
    not a meta record, a compaction summary or an interruption notice."""
    if data.get("type") != "user" or data.get("isMeta") or data.get("isCompactSummary"):
        return False
    content = (data.get("message") or {}).get("content")
    if isinstance(content, str):
        return bool(content.strip()) and not content.startswith(_INTERRUPTED)
    if not isinstance(content, list):
        return False
    kinds = [b.get("type") for b in content if isinstance(b, dict)]
    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    if any(t.startswith(_INTERRUPTED) for t in texts):
        return False
    return bool(kinds) and any(k != "tool_result" for k in kinds)


def _system_message(data: dict, source: dict) -> dict | None:
    created_at = data.get("timestamp")
    if data.get("subtype") == "compact_boundary":
        compact = data.get("compactMetadata") or {}
        part = {
            "part_type": "compaction",
            "compaction_auto": compact.get("trigger") == "auto",
            "is_synthetic": True,
            "metadata": {"compact_metadata": compact, "source": source},
        }
        content = data.get("content") or "Conversation compacted"
        return {"role": "system", "content": content, "parts": [part], "created_at": created_at}
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        return None
    meta = {"block": "string", "subtype": data.get("subtype"), "source": source}
    return {
        "role": "system",
        "parts": [{"part_type": "text", "text_content": content, "metadata": meta}],
        "created_at": created_at,
    }


def _message(record: _Record, tool_names: dict[str, str], responses: dict) -> dict | None:
    """The raw message dict (validated later) of a record, or None if it carries none."""
    data = record.data
    kind = data.get("type")
    source: dict[str, Any] = {"uuid": record.uuid}
    if record.parent:
        source["parent_uuid"] = record.parent
    if kind == "system":
        return _system_message(data, source)
    if kind not in ("user", "assistant"):
        return None
    message = data.get("message") or {}
    parts = blocks_to_parts(message.get("content"), tool_names)
    if not parts:
        return None
    first_meta = parts[0].setdefault("metadata", {})
    first_meta["source"] = source
    if kind == "assistant":
        for key in ("model", "id", "stop_reason"):
            if message.get(key):
                source[key] = message[key]
        if data.get("requestId"):
            source["request_id"] = data["requestId"]
        _mark_response(source, message, record.uuid, responses)
    if data.get("isCompactSummary"):
        first_meta["compact_summary"] = True
    if data.get("isMeta"):
        for part in parts:
            part["is_synthetic"] = True
    role = role_for("assistant" if kind == "assistant" else "user", parts)
    return {"role": role, "parts": parts, "created_at": data.get("timestamp")}


def _mark_response(source: dict, message: dict, uuid: str, responses: dict) -> None:
    """Usage on the first record of an API response; the others point at it."""
    response_id = message.get("id")
    usage = message.get("usage")
    if not response_id:
        if usage:
            source["usage"] = usage
        return
    first = responses.setdefault(response_id, uuid)
    if first == uuid:
        if usage:
            source["usage"] = usage
        return
    source["same_response_as"] = f"claude-code:{first}"
    source["usage_repeated"] = True


class _Tree:
    """The records of one file as a tree, with the lines (main, branches) cut from it."""

    def __init__(self, records: dict[str, _Record], order: list[str]):
        self.records = records
        self.order = order
        self.main_order = [u for u in order if not records[u].sidechain]
        self.roots: list[str] = []
        for uuid in self.main_order:
            parent = records[uuid].parent
            if parent in records and not records[parent].sidechain:
                records[parent].children.append(uuid)
            else:
                self.roots.append(uuid)
        self.last_line = self._last_lines()
        self.owner: dict[str, str] = {}  # record -> the branch prompt it belongs to ("" = main)
        self.forks: dict[str, str | None] = {}  # branch prompt -> the parent it forked from
        self._assign()

    def _last_lines(self) -> dict[str, int]:
        """The last file line written in each record's subtree (one post-order walk)."""
        last = {u: self.records[u].line for u in self.main_order}
        done: set[str] = set()
        for root in self.roots:
            stack = [(root, False)]
            while stack:
                uuid, children_done = stack.pop()
                record = self.records[uuid]
                if children_done:
                    last[uuid] = max([record.line] + [last[c] for c in record.children])
                    continue
                if uuid in done:
                    continue
                done.add(uuid)
                stack.append((uuid, True))
                stack.extend((c, False) for c in record.children if c not in done)
        return last

    def _branch_prompts(self, siblings: list[str]) -> list[str]:
        prompts = [u for u in siblings if _is_prompt(self.records[u].data)]
        if len(prompts) < 2:
            return []
        kept = max(prompts, key=lambda u: self.last_line[u])
        return [u for u in prompts if u != kept]

    def _assign(self) -> None:
        # At the start, only prompts with no parent at all compete (an edited first
        # prompt); a record whose parent is not in the file forks nothing.
        starts = [u for u in self.roots if self.records[u].parent is None]
        branch_roots = {u: None for u in self._branch_prompts(starts)}
        for uuid in self.main_order:
            for child in self._branch_prompts(self.records[uuid].children):
                branch_roots[child] = uuid
        self.forks = branch_roots
        stack = [(root, "") for root in self.roots]
        while stack:
            uuid, owner = stack.pop()
            owner = uuid if uuid in branch_roots else owner
            self.owner[uuid] = owner
            stack.extend((c, owner) for c in self.records[uuid].children if c not in self.owner)
        for uuid in self.main_order:  # a parentUuid loop reaches no root: keep it on main
            self.owner.setdefault(uuid, "")

    def line_of(self, owner: str) -> list[str]:
        """The records of the main line ("") or of a branch (with what came before it)."""
        own = [u for u in self.main_order if self.owner.get(u) == owner]
        if not owner:
            return own
        parent = self.forks[owner]
        before = self.line_of(self.owner[parent]) if parent else []
        start = self.records[owner].line
        return sorted(
            [u for u in before if self.records[u].line < start] + own,
            key=lambda u: self.records[u].line,
        )


def _read_records(lines: list[Line], parsed: Parsed) -> tuple[dict, list, dict, dict]:
    records: dict[str, _Record] = {}
    order: list[str] = []
    titles: dict[str, str] = {}
    facts: dict[str, Any] = {}
    for line in lines:
        data = line.value
        if not isinstance(data, dict):
            parsed.error(line.number, "a record must be a JSON object")
            continue
        kind = data.get("type")
        if not isinstance(kind, str) and kind is not None:
            parsed.error(line.number, "type must be a string")
            continue
        if kind == "summary":
            if isinstance(data.get("summary"), str):
                titles[str(data.get("leafUuid"))] = data["summary"]
            continue
        if kind == "ai-title" and isinstance(data.get("aiTitle") or data.get("title"), str):
            facts["ai_title"] = data.get("aiTitle") or data.get("title")
        uuid = data.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            if kind in _MESSAGE_TYPES:
                parsed.error(line.number, f"a {kind} record without a uuid")
            else:
                parsed.skip(str(kind))
            continue
        if uuid in records:
            continue  # Claude Code can write a record twice when a session resumes
        problem = _shape_problem(data)
        if problem:
            parsed.error(line.number, problem)
            continue
        if kind not in _MESSAGE_TYPES:
            parsed.skip(str(kind))  # in the chain, but no conversation content
        with contextlib.suppress(*MALFORMED):  # odd facts: the record is still a record
            _remember_facts(data, facts)
        records[uuid] = _Record(
            line.number, data, uuid, _parent(data), bool(data.get("isSidechain"))
        )
        order.append(uuid)
    return records, order, titles, facts


def _shape_problem(data: dict) -> str | None:
    """Why a record with a uuid cannot be placed in the tree, if it cannot."""
    parent = _parent(data)
    if parent is not None and not isinstance(parent, str):
        return "parentUuid must be a string or null"
    if data.get("message") is not None and not isinstance(data.get("message"), dict):
        return "message must be an object"
    return None


def _remember_facts(data: dict, facts: dict) -> None:
    """Session facts for the conversation's metadata (the last value wins)."""
    for key, name in (
        ("sessionId", "session"),
        ("cwd", "cwd"),
        ("gitBranch", "git_branch"),
        ("version", "agent_version"),
    ):
        value = data.get(key)
        if isinstance(value, str) and value:
            if name == "session":
                facts.setdefault("sessions", [])
                if value not in facts["sessions"]:
                    facts["sessions"].append(value)
            else:
                facts[name] = value
    model = (data.get("message") or {}).get("model") if data.get("type") == "assistant" else None
    if isinstance(model, str) and model and not model.startswith("<"):
        facts["model"] = model
    when = data.get("timestamp")
    if isinstance(when, str):
        facts.setdefault("started_at", when)
        facts["ended_at"] = when


def _metadata(facts: dict) -> dict:
    meta = {"agent": AGENT}
    for key in ("agent_version", "cwd", "git_branch", "model", "started_at", "ended_at"):
        if facts.get(key):
            meta[key] = facts[key]
    return meta


def parse(lines: list[Line], *, session_id: str | None, default_session: str) -> Parsed:
    parsed = Parsed()
    records, order, titles, facts = _read_records(lines, parsed)
    sessions = facts.get("sessions") or []
    main_session = session_id or (sessions[0] if sessions else default_session)
    tree = _Tree(records, order)
    tool_names: dict[str, str] = {}
    responses: dict[str, str] = {}
    # Messages are built in file order once (tool names come from earlier tool_use blocks).
    built: dict[str, tuple[int, dict | None]] = {}
    for uuid in order:
        try:
            built[uuid] = (records[uuid].line, _message(records[uuid], tool_names, responses))
        except MALFORMED as error:
            parsed.error(records[uuid].line, f"a record that could not be read: {error}")
            built[uuid] = (records[uuid].line, None)  # still links the chain
    meta = _metadata(facts)
    main_uuids = tree.line_of("")
    title = next((titles[u] for u in reversed(main_uuids) if u in titles), "")
    main = _conversation(main_session, title or facts.get("ai_title", ""), main_uuids, built)
    main.metadata = dict(meta, line="main")
    parsed.add(main)
    for prompt, parent in tree.forks.items():
        uuids = tree.line_of(prompt)
        branch = _conversation(f"{main_session}:branch:{prompt}", "", uuids, built)
        branch.metadata = dict(
            meta,
            line="branch",
            parent_session=main_session,
            branch_reason=f"a second user prompt under {parent or 'the session start'} "
            "(an edited or retried prompt)",
            fork_parent_uuid=parent,
        )
        parsed.add(branch)
    for root, members in _sidechains(records, order).items():
        side = _conversation(f"{main_session}:sidechain:{root}", "", members, built)
        side.metadata = dict(meta, line="sidechain", parent_session=main_session)
        parsed.add(side)
    return parsed


def _sidechains(records: dict[str, _Record], order: list[str]) -> dict[str, list[str]]:
    sidechains: dict[str, list[str]] = {}
    for uuid in order:
        if not records[uuid].sidechain:
            continue
        root, seen = uuid, {uuid}
        while records[root].parent in records and records[records[root].parent].sidechain:
            root = records[root].parent
            if root in seen:
                break
            seen.add(root)
        sidechains.setdefault(root, []).append(uuid)
    return sidechains


def _conversation(
    session_id: str, title: str, uuids: list[str], built: dict[str, tuple[int, Any]]
) -> ParsedConversation:
    conversation = ParsedConversation(session_id=session_id, title=title)
    since: list[str] = []
    boundary: dict = {}
    for uuid in uuids:
        line, message = built[uuid]
        if message is None:
            continue
        external_id = f"claude-code:{uuid}"
        message["external_id"] = external_id
        first_meta = (message.get("parts") or [{}])[0].get("metadata") or {}
        if first_meta.get("compact_summary"):
            compaction = _compaction(message, since, external_id)
            compaction.metadata = dict(boundary)
            conversation.compactions.append(compaction)
            since, boundary = [], {}
        conversation.messages.append((line, message))
        parts = message.get("parts") or []
        if parts and parts[0].get("part_type") == "compaction":
            # The boundary is not what was summarised; its trigger and size describe it.
            boundary = {"compact_metadata": parts[0]["metadata"].get("compact_metadata")}
            boundary["boundary_external_id"] = external_id
        else:
            since.append(external_id)
    return conversation


def _compaction(message: dict, since: list[str], external_id: str) -> AgentCompaction:
    text = "\n".join(
        p.get("text_content") or "" for p in message["parts"] if p.get("part_type") == "text"
    )
    return AgentCompaction(
        summary=text, covered=list(since), at_external_id=external_id, author=AGENT
    )


# -- sub-agents ----------------------------------------------------------------------


def subagent_files(path: Path, session: str) -> list[Path]:
    """Sub-agent transcripts of a session: `<session>/subagents/agent-*.jsonl` (2.1.x) and
    `agent-*.jsonl` beside the session file that name the session (older)."""
    found = sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl"))
    for candidate in sorted(path.parent.glob("agent-*.jsonl")):
        if candidate != path and _first_session(candidate) == session:
            found.append(candidate)
    return found


def _first_session(path: Path) -> str | None:
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for text in handle:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if isinstance(value, dict) and isinstance(value.get("sessionId"), str):
                return value["sessionId"]
    return None


def _agent_calls(lines: list[Line]) -> dict[str, dict]:
    """agent id -> the tool call of the main session that started it (from the result)."""
    calls: dict[str, dict] = {}
    for line in lines:
        data = line.value
        result = data.get("toolUseResult") if isinstance(data, dict) else None
        if not isinstance(result, dict) or not isinstance(result.get("agentId"), str):
            continue
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        ids = [
            b.get("tool_use_id")
            for b in (content if isinstance(content, list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        calls[result["agentId"]] = {
            "parent_tool_call_id": ids[0] if ids else None,
            "agent_type": result.get("agentType"),
        }
    return calls


def parse_with_subagents(
    path: Path, *, session_id: str | None, default_session: str
) -> tuple[Parsed, list[Line]]:
    """The session file and its sub-agent files, each sub-agent a linked conversation."""
    parsed = Parsed()
    lines = read_jsonl(path, parsed)
    result = parse(lines, session_id=session_id, default_session=default_session)
    result.errors[:0] = parsed.errors
    if not result.conversations:
        return result, lines
    main = result.conversations[0]
    own_session = next(
        (
            x.value["sessionId"]
            for x in lines
            if isinstance(x.value, dict) and isinstance(x.value.get("sessionId"), str)
        ),
        main.session_id,
    )
    calls = _agent_calls(lines)
    for agent_file in subagent_files(path, own_session):
        agent_id = agent_file.stem.removeprefix("agent-")
        sub_parsed = Parsed()
        sub_lines = read_jsonl(agent_file, sub_parsed)
        for error in sub_parsed.errors:
            result.error(error["line"], f"{agent_file.name}: {error['message']}")
        records = [
            Line(x.number, dict(x.value, isSidechain=False)) if isinstance(x.value, dict) else x
            for x in sub_lines
        ]
        sub = parse(
            records, session_id=f"{main.session_id}:subagent:{agent_id}", default_session=""
        )
        for error in sub.errors:
            result.error(error["line"], f"{agent_file.name}: {error['message']}")
        result.skipped.update(sub.skipped)
        for conversation in sub.conversations:
            line = conversation.metadata.get("line")
            conversation.metadata.update(
                line="subagent" if line == "main" else f"subagent {line}",
                parent_session=main.session_id,
                agent_id=agent_id,
                source_file=agent_file.name,
                **{k: v for k, v in calls.get(agent_id, {}).items() if v},
            )
            result.add(conversation)
    return result, lines
