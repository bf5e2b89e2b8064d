"""Small session files in each coding agent's shape, written by the tests themselves (the
real files under /work/shared are never read by tests; docs/capture.md describes the
shapes). Each builder returns plain records; `write_jsonl` puts them on disk."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

SESSION = "5d0c7a52-1111-4c2e-9a0b-000000000001"


def write_jsonl(path: Path, records: list, *, tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


# -- Claude Code 2.x ------------------------------------------------------------------


def cc(uuid, parent, kind, content=None, *, when=None, **extra):
    record = {
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": SESSION,
        "cwd": "/work/app",
        "gitBranch": "feature/x",
        "version": "2.1.114",
        "type": kind,
        "uuid": uuid,
        "timestamp": when or f"2026-05-01T10:00:{int(uuid[1:]) % 60:02d}Z",
    }
    if content is not None:
        record["message"] = {"role": "user" if kind == "user" else "assistant", "content": content}
    record.update(extra)
    return record


def assistant(uuid, parent, blocks, response, **extra):
    record = cc(uuid, parent, "assistant", blocks, requestId=f"req_{response}", **extra)
    record["message"].update(
        id=f"msg_{response}",
        model="claude-opus-4-5",
        usage={"input_tokens": 10, "output_tokens": 5},
    )
    return record


def tool_use(call_id, name="Bash"):
    return {"type": "tool_use", "id": call_id, "name": name, "input": {"command": "ls"}}


def tool_result(call_id, text="ok"):
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def claude_code_2x() -> list[dict]:
    """A 2.x session: attachments and progress in the chain, one response split over three
    records with two parallel tool calls whose results hang off different records, a prompt
    the user edited (the first try left behind), a compaction, and a sub-agent call."""
    return [
        {"type": "permission-mode", "permissionMode": "default", "sessionId": SESSION},
        cc("a01", None, "attachment", attachment={"type": "hook_success"}),
        cc("u02", "a01", "user", "Count the files."),
        cc("a03", "u02", "attachment", attachment={"type": "skill_listing"}),
        assistant(
            "r04", "a03", [{"type": "thinking", "thinking": "Two calls.", "signature": "s"}], 1
        ),
        assistant("r05", "r04", [tool_use("toolu_1")], 1),
        assistant("r06", "r05", [tool_use("toolu_2", "Read")], 1),
        cc("u07", "r06", "user", [tool_result("toolu_2", "two")]),
        cc("p08", "u07", "progress", data={"type": "hook_progress"}),
        cc("u09", "r05", "user", [tool_result("toolu_1", "one")]),
        assistant("r10", "u09", [{"type": "text", "text": "There are 3 files."}], 2),
        # The user's first try of the next prompt, then the edited prompt under the same parent.
        cc("u11", "r10", "user", "Delete them all."),
        assistant("r12", "u11", [{"type": "text", "text": "Deleting."}], 3),
        cc("u13", "r10", "user", "Delete only the logs."),
        assistant("r14", "u13", [tool_use("toolu_3", "Task")], 4),
        cc(
            "u15",
            "r14",
            "user",
            [tool_result("toolu_3", "sub-agent done")],
            toolUseResult={"agentId": "abc123", "agentType": "general-purpose"},
        ),
        cc(
            "s16",
            None,
            "system",
            subtype="compact_boundary",
            content="Conversation compacted",
            logicalParentUuid="u15",
            compactMetadata={"trigger": "auto", "preTokens": 150000},
        ),
        cc(
            "u17",
            "s16",
            "user",
            "Summary: the user counted files and deleted the logs.",
            isCompactSummary=True,
        ),
        cc("u18", "u17", "user", "Thanks, what is left?"),
        assistant("r19", "u18", [{"type": "text", "text": "Only the sources."}], 5),
        {"type": "last-prompt", "lastPrompt": "Thanks", "sessionId": SESSION},
        {"type": "ai-title", "aiTitle": "Cleaning up files", "sessionId": SESSION},
    ]


def subagent(agent_id: str) -> list[dict]:
    return [
        cc("x01", None, "user", "Find the logs.", isSidechain=True, agentId=agent_id),
        assistant("x02", "x01", [{"type": "text", "text": "Found 2 logs."}], 90, isSidechain=True),
    ]


# -- Codex CLI ------------------------------------------------------------------------


def cx(kind, payload, second=0):
    return {"timestamp": f"2026-05-02T09:00:{second:02d}.000Z", "type": kind, "payload": payload}


def item(payload, second=0):
    return cx("response_item", payload, second)


def codex_rollout() -> list[dict]:
    env = "<environment_context>\n  <cwd>/work/api</cwd>\n</environment_context>"
    return [
        cx(
            "session_meta",
            {
                "id": "019b0000-aaaa-7000-8000-000000000001",
                "timestamp": "2026-05-02T09:00:00.000Z",
                "cwd": "/work/api",
                "originator": "codex_cli_rs",
                "cli_version": "0.60.0",
                "instructions": "Follow AGENTS.md.",
                "git": {"branch": "main", "commit_hash": "abc"},
            },
        ),
        item(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": env}]}, 1
        ),
        cx(
            "turn_context",
            {"cwd": "/work/api", "model": "gpt-5.1-codex", "approval_policy": "never"},
            2,
        ),
        item(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Fix the test."}],
            },
            3,
        ),
        cx("event_msg", {"type": "user_message", "message": "Fix the test."}, 3),
        item(
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Looking at tests**"}],
                "encrypted_content": "gAAA",
            },
            4,
        ),
        cx("event_msg", {"type": "agent_reasoning", "text": "**Looking at tests**"}, 4),
        item(
            {
                "type": "function_call",
                "name": "shell_command",
                "arguments": json.dumps({"command": "pytest -q"}),
                "call_id": "call_1",
            },
            5,
        ),
        item({"type": "function_call_output", "call_id": "call_1", "output": "1 failed"}, 6),
        item(
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": "call_2",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** Update File: a.py\n-x\n+y\n*** End Patch",
            },
            7,
        ),
        item(
            {
                "type": "custom_tool_call_output",
                "call_id": "call_2",
                "output": [{"type": "input_text", "text": "Success."}],
            },
            8,
        ),
        item({"type": "web_search_call", "status": "completed", "action": {"query": "pytest"}}, 9),
        cx(
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "total_token_usage": {"input_tokens": 900, "output_tokens": 90},
                    "last_token_usage": {"input_tokens": 300, "output_tokens": 30},
                },
            },
            10,
        ),
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Fixed."}],
            },
            11,
        ),
        cx("event_msg", {"type": "agent_message", "message": "Fixed."}, 11),
        cx(
            "compacted",
            {
                "message": "The user asked to fix a test; it was fixed with a patch.",
                "replacement_history": [{"type": "message", "role": "user", "content": []}],
            },
            12,
        ),
        item(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Now commit."}],
            },
            13,
        ),
        cx("future_record_type", {"anything": 1}, 14),
        item(
            {
                "type": "function_call",
                "name": "exec",
                "arguments": "{not json",
                "call_id": "call_3",
            },
            15,
        ),
        item({"type": "function_call_output", "call_id": "call_3", "output": "done"}, 16),
    ]


def codex_fork(parent: list[dict], *, fork_id: str, cut: int, own: list[str]) -> list[dict]:
    """A fork as Codex writes it: its own session_meta (`forked_from_id`), the parent's
    first `cut` lines again (the parent's session_meta among them, timestamps new), then
    the fork's own prompts."""
    parent_id = parent[0]["payload"]["id"]
    header = dict(parent[0]["payload"], id=fork_id, forked_from_id=parent_id)
    replay = [dict(record, timestamp="2026-05-02T10:00:00.000Z") for record in parent[:cut]]
    prompts = [
        item({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]})
        for t in own
    ]
    return [cx("session_meta", header, 59), *replay, *prompts]


# -- Gemini CLI -----------------------------------------------------------------------


def gemini_chat(*, extra_messages: int = 0) -> dict:
    messages = [
        {
            "id": "m1",
            "timestamp": "2026-05-03T08:00:00Z",
            "type": "user",
            "content": "List the files.",
        },
        {
            "id": "m2",
            "timestamp": "2026-05-03T08:00:05Z",
            "type": "gemini",
            "content": "Here they are.",
            "model": "gemini-2.5-pro",
            "thoughts": [{"subject": "Listing", "description": "Use ls.", "timestamp": "x"}],
            "tokens": {"input": 100, "output": 10, "total": 110},
            "toolCalls": [
                {
                    "id": "ls-1",
                    "name": "list_directory",
                    "args": {"path": "."},
                    "status": "success",
                    "result": [
                        {
                            "functionResponse": {
                                "id": "ls-1",
                                "name": "list_directory",
                                "response": {"output": "a.py"},
                            }
                        }
                    ],
                    "displayName": "ReadFolder",
                }
            ],
        },
        {
            "id": "m3",
            "timestamp": "2026-05-03T08:00:06Z",
            "type": "info",
            "content": "Model switched.",
        },
        {"id": "m4", "timestamp": "2026-05-03T08:00:07Z", "type": "error", "content": "Quota low."},
        {"id": "m5", "timestamp": "2026-05-03T08:00:08Z", "type": "mystery", "content": "?"},
    ]
    for n in range(extra_messages):
        messages.append(
            {
                "id": f"n{n}",
                "timestamp": "2026-05-03T08:01:00Z",
                "type": "user",
                "content": f"more {n}",
            }
        )
    return {
        "sessionId": "gem-0001",
        "projectHash": "ab" * 32,
        "startTime": "2026-05-03T08:00:00Z",
        "lastUpdated": "2026-05-03T08:01:00Z",
        "messages": messages,
    }


# -- OpenCode -------------------------------------------------------------------------

OC_SESSION = "ses_test0001"


def opencode_session() -> tuple[dict, list[tuple[dict, list[dict]]]]:
    """(session info, [(message info, parts)]) with a tool part, steps, a compaction and
    the summary message after it, a patch, a file and an unknown part type."""
    info = {
        "id": OC_SESSION,
        "projectID": "proj1",
        "directory": "/work/site",
        "title": "Improve the spec",
        "version": "1.16.0",
        "time": {"created": 1780000000000, "updated": 1780000100000},
    }
    t = 1780000000000
    user = lambda i, text: (  # noqa: E731
        {"id": f"msg_{i:02d}", "sessionID": OC_SESSION, "role": "user", "time": {"created": t + i}},
        [{"id": f"prt_{i:02d}a", "type": "text", "text": text}],
    )
    answer = lambda i, parts, **more: (  # noqa: E731
        {
            "id": f"msg_{i:02d}",
            "sessionID": OC_SESSION,
            "role": "assistant",
            "modelID": "deepseek-v4",
            "providerID": "x",
            "path": {"cwd": "/work/site", "root": "/work/site"},
            "time": {"created": t + i, "completed": t + i + 1},
            **more,
        },
        parts,
    )
    messages = [
        user(1, "Read SPEC.md"),
        answer(
            2,
            [
                {"id": "prt_02a", "type": "step-start", "snapshot": "snap1"},
                {"id": "prt_02b", "type": "reasoning", "text": "Find it first."},
                {
                    "id": "prt_02c",
                    "type": "tool",
                    "tool": "read",
                    "callID": "call_r1",
                    "state": {
                        "status": "completed",
                        "input": {"filePath": "SPEC.md"},
                        "output": "# Spec",
                        "title": "SPEC.md",
                        "metadata": {"lines": 1},
                    },
                },
                {"id": "prt_02d", "type": "patch", "hash": "h1", "files": ["SPEC.md"]},
                {
                    "id": "prt_02e",
                    "type": "step-finish",
                    "reason": "tool-calls",
                    "cost": 0.001,
                    "tokens": {
                        "input": 20,
                        "output": 7,
                        "reasoning": 0,
                        "cache": {"read": 0, "write": 0},
                    },
                },
                {"id": "prt_02f", "type": "hologram", "beam": 1},
            ],
        ),
        (
            {"id": "msg_03", "sessionID": OC_SESSION, "role": "user", "time": {"created": t + 3}},
            [{"id": "prt_03a", "type": "compaction", "auto": True}],
        ),
        answer(
            4,
            [{"id": "prt_04a", "type": "text", "text": "Summary: SPEC.md was read."}],
            summary=True,
        ),
        user(5, "Continue"),
        answer(
            6,
            [
                {
                    "id": "prt_06a",
                    "type": "file",
                    "mime": "text/plain",
                    "filename": "a.txt",
                    "url": "file:///a.txt",
                }
            ],
        ),
    ]
    return info, messages


def write_opencode_db(path: Path, sessions) -> Path:
    """The 1.2+ layout: ids in the row columns, the rest in the JSON `data` column."""
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE session (id text PRIMARY KEY, project_id text NOT NULL, parent_id text,
          slug text NOT NULL, directory text NOT NULL, title text NOT NULL, version text NOT NULL,
          time_created integer NOT NULL, time_updated integer NOT NULL, agent text, model text);
        CREATE TABLE message (id text PRIMARY KEY, session_id text NOT NULL,
          time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
        CREATE TABLE part (id text PRIMARY KEY, message_id text NOT NULL, session_id text NOT NULL,
          time_created integer NOT NULL, time_updated integer NOT NULL, data text NOT NULL);
        """
    )
    for info, messages in sessions:
        created = info["time"]["created"]
        db.execute(
            "INSERT INTO session VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                info["id"], info["projectID"], info.get("parentID"), "slug", info["directory"],
                info["title"], "v" + info["version"], created, info["time"]["updated"], "build",
                json.dumps({"id": "deepseek-v4", "providerID": "x"}),
            ),
        )  # fmt: skip
        for message, parts in messages:
            data = {k: v for k, v in message.items() if k not in ("id", "sessionID")}
            when = message["time"]["created"]
            db.execute(
                "INSERT INTO message VALUES (?,?,?,?,?)",
                (message["id"], info["id"], when, when, json.dumps(data)),
            )
            for part in parts:
                body = {k: v for k, v in part.items() if k != "id"}
                db.execute(
                    "INSERT INTO part VALUES (?,?,?,?,?,?)",
                    (part["id"], message["id"], info["id"], when, when, json.dumps(body)),
                )
    db.commit()
    db.close()
    return path


def write_opencode_storage(root: Path, sessions) -> Path:
    """The pre-1.2 tree: storage/session/<project>/<id>.json, message/<session>/, part/<message>/."""
    storage = root / "storage"
    for info, messages in sessions:
        target = storage / "session" / info["projectID"] / f"{info['id']}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(info))
        for message, parts in messages:
            folder = storage / "message" / info["id"]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{message['id']}.json").write_text(json.dumps(message))
            part_folder = storage / "part" / message["id"]
            part_folder.mkdir(parents=True, exist_ok=True)
            for part in parts:
                (part_folder / f"{part['id']}.json").write_text(json.dumps(part))
    return root
