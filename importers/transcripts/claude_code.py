"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`).

One JSON record per line. `user` and `assistant` records carry an Anthropic `message`
(content blocks: text, thinking, tool_use, tool_result, image); each record has a `uuid`
and a `parentUuid`, so the records form a tree. How that tree maps onto conversations:

* The main line: among the records that are not sidechains, the last leaf in file order
  is where the session ended; the path from the root to it (following `parentUuid`, and
  across a compaction the boundary's `logicalParentUuid`) is the main conversation,
  with the session id of the transcript (or `--session-id`).
* Branches: every other leaf (an edited or retried prompt left behind) becomes its own
  conversation `<session>:branch:<its leaf uuid>` holding its whole path from
  the root, so each reads on its own (the shared start is repeated).
* Sidechains (`isSidechain`: a sub-agent's work) become one conversation per sidechain
  root, `<session>:sidechain:<its root uuid>`, its records in file order.
* A `system` record with subtype `compact_boundary` becomes a `system` message with a
  `compaction` part (`compaction_auto` from its trigger, `metadata.compact_metadata`);
  the user record after it that holds the compaction summary (`isCompactSummary`) is kept
  as a user message whose text part says `metadata.compact_summary: true`.
* `summary` records (titles Claude Code writes) give the conversation its title.
* Other `system` records with text become `system` messages. Record types that carry no
  conversation (file-history-snapshot, queue-operation, progress, ...) are skipped and
  counted in the report's notes.

External ids are `claude-code:<uuid>`, so a re-import adds nothing and an import of a
session that went on adds only the new records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from importers.transcripts.blocks import blocks_to_parts, role_for
from importers.transcripts.common import Line, Parsed, ParsedConversation

_MESSAGE_TYPES = {"user", "assistant", "system"}


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


def _message(record: _Record, tool_names: dict[str, str]) -> dict | None:
    """The raw message dict (validated later) of a record, or None if it carries none."""
    data = record.data
    kind = data.get("type")
    created_at = data.get("timestamp")
    source = {"uuid": record.uuid}
    if record.parent:
        source["parent_uuid"] = record.parent
    if kind == "system":
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
        return {
            "role": "system",
            "parts": [
                {
                    "part_type": "text",
                    "text_content": content,
                    "metadata": {
                        "block": "string",
                        "subtype": data.get("subtype"),
                        "source": source,
                    },
                }
            ],
            "created_at": created_at,
        }
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
    if data.get("isCompactSummary"):
        first_meta["compact_summary"] = True
    if data.get("isMeta"):
        for part in parts:
            part["is_synthetic"] = True
    role = role_for("assistant" if kind == "assistant" else "user", parts)
    return {"role": role, "parts": parts, "created_at": created_at}


def parse(lines: list[Line], *, session_id: str | None, default_session: str) -> Parsed:
    parsed = Parsed()
    records: dict[str, _Record] = {}
    order: list[str] = []
    titles: dict[str, str] = {}
    sessions: list[str] = []
    for line in lines:
        data = line.value
        if not isinstance(data, dict):
            parsed.error(line.number, "a record must be a JSON object")
            continue
        kind = data.get("type")
        if kind == "summary":
            if isinstance(data.get("summary"), str):
                titles[str(data.get("leafUuid"))] = data["summary"]
            continue
        if kind not in _MESSAGE_TYPES:
            parsed.skip(str(kind))
            continue
        uuid = data.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            parsed.error(line.number, f"a {kind} record without a uuid")
            continue
        if uuid in records:
            continue  # Claude Code can write a record twice when a session resumes
        if isinstance(data.get("sessionId"), str) and data["sessionId"] not in sessions:
            sessions.append(data["sessionId"])
        records[uuid] = _Record(
            line.number, data, uuid, _parent(data), bool(data.get("isSidechain"))
        )
        order.append(uuid)
    for uuid in order:
        parent = records[uuid].parent
        if parent in records:
            records[parent].children.append(uuid)
    main_session = session_id or (sessions[0] if sessions else default_session)

    def path_to(leaf: str) -> list[str]:
        path, seen, cursor = [], set(), leaf
        while cursor in records and cursor not in seen:
            seen.add(cursor)
            path.append(cursor)
            cursor = records[cursor].parent
        return path[::-1]

    main_records = [u for u in order if not records[u].sidechain]
    leaves = [
        u for u in main_records if not any(not records[c].sidechain for c in records[u].children)
    ]
    tool_names: dict[str, str] = {}
    # Messages are built in file order once (tool names come from earlier tool_use blocks).
    built: dict[str, tuple[int, dict | None]] = {
        u: (records[u].line, _message(records[u], tool_names)) for u in order
    }
    if leaves:
        main_leaf = leaves[-1]
        title = next((titles[u] for u in reversed(path_to(main_leaf)) if u in titles), "")
        parsed.add(_conversation(main_session, title, path_to(main_leaf), built))
        for leaf in leaves[:-1]:
            parsed.add(
                _conversation(
                    f"{main_session}:branch:{leaf}", titles.get(leaf, ""), path_to(leaf), built
                )
            )
    sidechains: dict[str, list[str]] = {}
    for uuid in order:
        if not records[uuid].sidechain:
            continue
        root = uuid
        while records[root].parent in records and records[records[root].parent].sidechain:
            root = records[root].parent
        sidechains.setdefault(root, []).append(uuid)
    for root, members in sidechains.items():
        parsed.add(_conversation(f"{main_session}:sidechain:{root}", "", members, built))
    return parsed


def _conversation(
    session_id: str, title: str, uuids: list[str], built: dict[str, tuple[int, Any]]
) -> ParsedConversation:
    conversation = ParsedConversation(session_id=session_id, title=title)
    for uuid in uuids:
        line, message = built[uuid]
        if message is None:
            continue
        message["external_id"] = f"claude-code:{uuid}"
        conversation.messages.append((line, message))
    return conversation
