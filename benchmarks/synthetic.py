"""Synthetic sources for tests and benchmarks: a Claude Code session transcript and a
lossless-claw database with the schema lossless-claw 0.15.3 writes (its core tables, DDL
as in the fixture `../shared/fixtures/lossless-claw-0.15.3/lcm.db`), built here without
its program.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid as uuidlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

# The core tables of lossless-claw 0.15.3 (as its lcm.db declares them).
LOSSLESS_CLAW_DDL = """
CREATE TABLE conversations (
  conversation_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,
  session_key TEXT, active INTEGER NOT NULL DEFAULT 1, archived_at TEXT, archive_cause TEXT,
  title TEXT, bootstrapped_at TEXT, created_at TEXT NOT NULL DEFAULT (datetime('now')),
  updated_at TEXT NOT NULL DEFAULT (datetime('now')));
CREATE TABLE messages (
  message_id INTEGER PRIMARY KEY AUTOINCREMENT,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
  content TEXT NOT NULL, token_count INTEGER NOT NULL, identity_hash TEXT,
  openclaw_sender_metadata TEXT, transcript_entry_id TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')), large_content TEXT, stable_event_key TEXT,
  UNIQUE (conversation_id, seq));
CREATE TABLE message_parts (
  part_id TEXT PRIMARY KEY,
  message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE CASCADE,
  session_id TEXT NOT NULL,
  part_type TEXT NOT NULL CHECK (part_type IN ('text', 'reasoning', 'tool', 'patch', 'file',
    'subtask', 'compaction', 'step_start', 'step_finish', 'snapshot', 'agent', 'retry')),
  ordinal INTEGER NOT NULL, text_content TEXT, is_ignored INTEGER, is_synthetic INTEGER,
  tool_call_id TEXT, tool_name TEXT, tool_status TEXT, tool_input TEXT, tool_output TEXT,
  tool_error TEXT, tool_title TEXT, patch_hash TEXT, patch_files TEXT, file_mime TEXT,
  file_name TEXT, file_url TEXT, subtask_prompt TEXT, subtask_desc TEXT, subtask_agent TEXT,
  step_reason TEXT, step_cost REAL, step_tokens_in INTEGER, step_tokens_out INTEGER,
  snapshot_hash TEXT, compaction_auto INTEGER, metadata TEXT, UNIQUE (message_id, ordinal));
CREATE TABLE summaries (
  summary_id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')), depth INTEGER NOT NULL DEFAULT 0,
  content TEXT NOT NULL, token_count INTEGER NOT NULL, earliest_at TEXT, latest_at TEXT,
  descendant_count INTEGER NOT NULL DEFAULT 0, descendant_token_count INTEGER NOT NULL DEFAULT 0,
  source_message_token_count INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL DEFAULT (datetime('now')), file_ids TEXT NOT NULL DEFAULT '[]',
  model TEXT NOT NULL DEFAULT 'unknown');
CREATE TABLE summary_messages (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL, PRIMARY KEY (summary_id, message_id));
CREATE TABLE summary_parents (
  summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
  parent_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
  ordinal INTEGER NOT NULL, PRIMARY KEY (summary_id, parent_summary_id));
CREATE TABLE context_items (
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  ordinal INTEGER NOT NULL, item_type TEXT NOT NULL CHECK (item_type IN ('message', 'summary')),
  message_id INTEGER REFERENCES messages(message_id) ON DELETE RESTRICT,
  summary_id TEXT REFERENCES summaries(summary_id) ON DELETE RESTRICT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')), PRIMARY KEY (conversation_id, ordinal),
  CHECK ((item_type = 'message' AND message_id IS NOT NULL AND summary_id IS NULL) OR
         (item_type = 'summary' AND summary_id IS NOT NULL AND message_id IS NULL)));
CREATE TABLE large_files (
  file_id TEXT PRIMARY KEY,
  conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
  file_name TEXT, mime_type TEXT, byte_size INTEGER, line_count INTEGER,
  storage_uri TEXT NOT NULL, exploration_summary TEXT,
  created_at TEXT NOT NULL DEFAULT (datetime('now')));
"""

_START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _stamp(seconds: int) -> str:
    return (_START + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")


def build_lossless_claw_db(
    path: Path,
    *,
    conversations: int,
    messages_per_conversation: int,
    leaf_size: int = 40,
    tag: str = "bench",
) -> dict[str, int]:
    """A lossless-claw database: user / assistant-with-tool-call / tool / assistant rounds,
    leaf summaries over all but the last round of each conversation, condensed summaries
    over groups of four leaves, and the active context (condensed, leftover leaves, tail).
    Returns the rows per table."""
    db = sqlite3.connect(path)
    db.executescript(LOSSLESS_CLAW_DDL)
    message_id = 0
    counts = dict.fromkeys(
        (
            "conversations",
            "messages",
            "message_parts",
            "summaries",
            "summary_messages",
            "summary_parents",
            "context_items",
        ),
        0,
    )
    for c in range(1, conversations + 1):
        session = f"{tag}-session-{c}"
        db.execute(
            "INSERT INTO conversations (conversation_id, session_id) VALUES (?, ?)", [c, session]
        )
        messages, parts = [], []
        ids = []
        for seq in range(1, messages_per_conversation + 1):
            message_id += 1
            ids.append(message_id)
            kind = (seq - 1) % 4
            call = f"toolu_{c:04d}{seq:07d}"
            at = _stamp(seq)
            if kind == 0:
                text = (
                    f"Please check module m{seq % 97}.py: case {seq} fails with code E{seq % 13}."
                )
                role, rows = "user", [("text", text, None, None, None, None)]
            elif kind == 1:
                text = f"I'll read m{seq % 97}.py."
                role = "assistant"
                rows = [
                    ("text", text, None, None, None, None),
                    (
                        "tool",
                        None,
                        call,
                        "read_file",
                        json.dumps({"path": f"m{seq % 97}.py"}),
                        None,
                    ),
                ]
            elif kind == 2:
                text = ""
                output = "\n".join(f"{i:4d}  def f_{seq}_{i}(x): return x + {i}" for i in range(5))
                role, rows = "tool", [("tool", None, call, "read_file", None, output)]
            else:
                text = f"Fixed case {seq}: the guard in m{seq % 97}.py was missing."
                role, rows = "assistant", [("text", text, None, None, None, None)]
            messages.append((message_id, c, seq, role, text, len(text) // 4 + 10, at))
            for ordinal, (ptype, ptext, call_id, tool, tool_input, output) in enumerate(rows):
                parts.append(
                    (
                        str(uuidlib.UUID(int=message_id * 8 + ordinal)),
                        message_id,
                        session,
                        ptype,
                        ordinal,
                        ptext,
                        call_id,
                        tool,
                        tool_input,
                        output,
                        json.dumps({"originalRole": role}),
                    )
                )
        db.executemany(
            "INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            messages,
        )
        db.executemany(
            "INSERT INTO message_parts (part_id, message_id, session_id, part_type, ordinal,"
            " text_content, tool_call_id, tool_name, tool_input, tool_output, metadata)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            parts,
        )
        counts["messages"] += len(messages)
        counts["message_parts"] += len(parts)
        # Leaves over all but the fresh tail; condensed over each full group of four leaves.
        tail = 8
        covered = ids[: max(0, len(ids) - tail)]
        leaves = []
        for start in range(0, len(covered) - leaf_size + 1, leaf_size):
            chunk = covered[start : start + leaf_size]
            sid = "sum_" + hashlib.sha256(f"{tag}:{c}:leaf:{start}".encode()).hexdigest()[:16]
            content = f"Leaf summary of messages {chunk[0]}-{chunk[-1]}: cases fixed, guards added."
            db.execute(
                "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content,"
                " token_count, earliest_at, latest_at, created_at, model)"
                " VALUES (?, ?, 'leaf', 0, ?, ?, ?, ?, ?, 'bench')",
                [sid, c, content, len(content) // 4, _stamp(1), _stamp(2), _stamp(3)],
            )
            db.executemany(
                "INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (?, ?, ?)",
                [(sid, m, i) for i, m in enumerate(chunk)],
            )
            counts["summary_messages"] += len(chunk)
            leaves.append(sid)
        uncovered = covered[len(leaves) * leaf_size :]
        condensed, leftover = [], list(leaves)
        while len(leftover) >= 4:
            group, leftover = leftover[:4], leftover[4:]
            sid = (
                "sum_" + hashlib.sha256(f"{tag}:{c}:condensed:{group[0]}".encode()).hexdigest()[:16]
            )
            content = f"Condensed summary of {len(group)} leaves."
            db.execute(
                "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content,"
                " token_count, earliest_at, latest_at, created_at, model, descendant_count)"
                " VALUES (?, ?, 'condensed', 1, ?, ?, ?, ?, ?, 'bench', 4)",
                [sid, c, content, len(content) // 4, _stamp(1), _stamp(2), _stamp(4)],
            )
            db.executemany(
                "INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal)"
                " VALUES (?, ?, ?)",
                [(sid, p, i) for i, p in enumerate(group)],
            )
            counts["summary_parents"] += len(group)
            condensed.append(sid)
        counts["summaries"] += len(leaves) + len(condensed)
        context = [("summary", None, s) for s in (*condensed, *leftover)]
        context += [("message", m, None) for m in (*uncovered, *ids[len(covered) :])]
        db.executemany(
            "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id,"
            " summary_id) VALUES (?, ?, ?, ?, ?)",
            [(c, i, t, m, s) for i, (t, m, s) in enumerate(context)],
        )
        counts["context_items"] += len(context)
        counts["conversations"] += 1
    db.commit()
    db.close()
    return counts


def claude_code_session(
    *, rounds: int, session_id: str = "5f0c2f7e-bench", compactions: int = 2
) -> list[dict]:
    """A Claude Code transcript: rounds of user prompt, assistant text + tool_use, user
    tool_result, assistant answer (four records each), with `compactions` compact
    boundaries (and their summary records) spread evenly, one abandoned branch and one
    sidechain. Returns the records in file order."""
    records: list[dict] = []
    clock = [0]

    def add(kind: str, parent: str | None, **fields) -> str:
        clock[0] += 1
        uid = str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{session_id}:{len(records) + 1}"))
        record = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/project",
            "sessionId": session_id,
            "version": "1.0.83",
            "type": kind,
            "uuid": uid,
            "timestamp": (_START + timedelta(seconds=clock[0])).isoformat().replace("+00:00", "Z"),
        }
        record.update(fields)
        records.append(record)
        return uid

    def user(parent, content, **extra):
        return add("user", parent, message={"role": "user", "content": content}, **extra)

    def assistant(parent, blocks, **extra):
        message = {
            "id": f"msg_{len(records):06d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": blocks,
            "stop_reason": "tool_use" if blocks[-1]["type"] == "tool_use" else "end_turn",
            "usage": {"input_tokens": 1200, "output_tokens": 80},
        }
        return add("assistant", parent, message=message, requestId=f"req_{len(records)}", **extra)

    boundaries = {rounds * (i + 1) // (compactions + 1) for i in range(compactions)}
    parent = None
    for r in range(rounds):
        if r in boundaries:
            boundary = add(
                "system",
                None,
                subtype="compact_boundary",
                content="Conversation compacted",
                level="info",
                isMeta=False,
                logicalParentUuid=parent,
                compactMetadata={
                    "trigger": "auto" if r == min(boundaries) else "manual",
                    "preTokens": 150000 + r,
                },
            )
            parent = user(
                boundary,
                "This session is being continued from a previous conversation that ran out of "
                f"context. Summary: rounds before {r} fixed cases in modules m0..m{r % 97}.",
                isCompactSummary=True,
                isVisibleInTranscriptOnly=True,
            )
        prompt = user(parent, f"Round {r}: module m{r % 97}.py fails with ticket RND-{r:05d}.")
        if r == 1:  # an abandoned attempt: the prompt was edited and retried
            assistant(prompt, [{"type": "text", "text": "First attempt, abandoned."}])
            prompt = user(parent, f"Round {r} (edited): module m{r % 97}.py fails.")
        call = f"toolu_{r:08d}"
        step = assistant(
            prompt,
            [
                {"type": "thinking", "thinking": f"Need to read m{r % 97}.py.", "signature": "sig"},
                {"type": "text", "text": f"Reading m{r % 97}.py."},
                {
                    "type": "tool_use",
                    "id": call,
                    "name": "Read",
                    "input": {"file_path": f"/home/dev/project/m{r % 97}.py"},
                },
            ],
        )
        result = user(
            step,
            [
                {
                    "type": "tool_result",
                    "tool_use_id": call,
                    "content": "\n".join(
                        f"{i:5d}\tdef f_{r}_{i}(x): return x + {i}" for i in range(6)
                    ),
                }
            ],
            toolUseResult={"type": "text"},
        )
        if r == 2:  # a sub-agent's work, on its own chain
            side = add(
                "user",
                None,
                isSidechain=True,
                message={"role": "user", "content": f"Search the tests for m{r}."},
            )
            add(
                "assistant",
                side,
                isSidechain=True,
                message={
                    "id": "msg_side",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "Found 3 tests."}],
                },
            )
        parent = assistant(result, [{"type": "text", "text": f"Fixed round {r}: guard added."}])
    records.append({"type": "summary", "summary": "Fixing module guards", "leafUuid": parent})
    records.append({"type": "file-history-snapshot", "messageId": parent, "snapshot": {}})
    return records
