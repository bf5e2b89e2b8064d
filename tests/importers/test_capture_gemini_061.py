"""Gemini CLI 0.61 as it writes its sessions: an append-only `.jsonl` log in
`~/.gemini/tmp/<project>/chats/`, the project's directory in `<project>/.project_root` (and
`~/.gemini/projects.json`), and each tool result written twice (on the call, and as the user
message that sends it back to the model). The shapes follow Gemini CLI 0.61's
chatRecordingService; the files are written here."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.capture import detect_format, evaluate_file, session_files
from conversations.models import ConversationOrigin, Message, MessagePart
from importers.services import import_file
from tests.importers.agent_sessions import write_jsonl

SESSION = "5f3c2a9e-0d61-4b7e-9a11-000000000061"
T = "2026-12-06T20:00:{:02d}.000Z"


def _tool_result(call_id: str, output: str) -> dict:
    return {"functionResponse": {"id": call_id, "name": "run_shell_command",
                                 "response": {"output": output}}}  # fmt: skip


def gemini_061_log() -> list[dict]:
    """A session as Gemini CLI 0.61 appends it (as the real 0.61.0 wrote one here): the
    metadata line, its injected `<session_context>` as a `$set` of messages, the prompt,
    the model's message (first without its calls, then with them running, then with their
    result), the result again as a user message, the answer with its tokens, and `$set`
    patches of lastUpdated."""
    call = {"id": "call-1", "name": "run_shell_command", "args": {"command": "ls"},
            "displayName": "Shell", "description": "ls", "renderOutputAsMarkdown": False}  # fmt: skip
    running = {"id": "g1", "timestamp": T.format(2), "type": "gemini", "content": "",
               "toolCalls": [dict(call, status="executing")], "thoughts": [],
               "model": "gemini-3-flash-preview"}  # fmt: skip
    done = dict(running, toolCalls=[dict(call, status="success", timestamp=T.format(3),
                                         result=[_tool_result("call-1", "a.py\nb.py")],
                                         resultDisplay="a.py\nb.py")])  # fmt: skip
    context = {"id": "c0", "timestamp": T.format(0), "type": "user",
               "content": [{"text": "<session_context>\nThis is the Gemini CLI. We are setting "
                                    "up the context for our chat.\n</session_context>"}]}  # fmt: skip
    return [
        {
            "sessionId": SESSION,
            "projectHash": "9f" * 32,
            "startTime": T.format(0),
            "lastUpdated": T.format(0),
            "kind": "main",
        },  # fmt: skip
        {"$set": {"messages": [context], "lastUpdated": T.format(0)}},  # its context, first
        {
            "id": "u1",
            "timestamp": T.format(1),
            "type": "user",
            "content": [{"text": "List the files."}],
        },
        {"$set": {"lastUpdated": T.format(1)}},
        {k: v for k, v in running.items() if k != "toolCalls"},  # first without its calls
        running,
        done,
        {
            "id": "u2",
            "timestamp": T.format(4),
            "type": "user",
            "content": [_tool_result("call-1", "a.py\nb.py")],
        },  # fmt: skip
        {"$set": {"lastUpdated": T.format(4)}},
        {
            "id": "g2",
            "timestamp": T.format(5),
            "type": "gemini",
            "content": "Two files: a.py, b.py.",
            "thoughts": [],
            "model": "gemini-3-flash-preview",
            "tokens": {
                "input": 812,
                "output": 9,
                "cached": 0,
                "thoughts": 0,
                "tool": 0,
                "total": 821,
            },
        },  # fmt: skip
    ]


def gemini_home(tmp_path: Path, *, marker: bool = True) -> Path:
    """~/.gemini with one project folder, its .project_root and projects.json; returns the
    session file."""
    home = tmp_path / ".gemini"
    folder = home / "tmp" / "work-app"
    if marker:
        (folder).mkdir(parents=True)
        (folder / ".project_root").write_text("/work/app\n")
    (home / "projects.json").parent.mkdir(parents=True, exist_ok=True)
    (home / "projects.json").write_text(json.dumps({"projects": {"/work/app": "work-app"}}))
    return write_jsonl(
        folder / "chats" / "session-2026-12-06T20-00-5f3c2a9e.jsonl", gemini_061_log()
    )


def test_a_gemini_061_session_is_read_as_gemini_and_the_project_marker_is_no_session(tmp_path):
    path = gemini_home(tmp_path)
    assert detect_format(path) == "gemini"
    assert session_files([tmp_path / ".gemini"]) == [path]  # not .project_root, not projects.json


def test_a_gemini_session_carries_its_project_from_project_root_or_projects_json(tmp_path, user):
    path = gemini_home(tmp_path)
    import_file(format="gemini", path=path, owner=user)
    origin = ConversationOrigin.objects.get(conversation__session_id=SESSION)
    assert origin.cwd == "/work/app"

    other = gemini_home(tmp_path / "older", marker=False)  # only projects.json says it
    import_file(format="gemini", path=other, owner=user, session_id="older")
    assert ConversationOrigin.objects.get(conversation__session_id="older").cwd == "/work/app"


def test_a_tool_result_gemini_writes_twice_is_stored_once(tmp_path, user):
    path = gemini_home(tmp_path)
    report = import_file(format="gemini", path=path, owner=user)
    outputs = MessagePart.objects.filter(
        message__conversation__session_id=SESSION, tool_output__contains="a.py"
    )
    assert outputs.count() == 1
    assert outputs.get().message.role == "assistant" and outputs.get().tool_call_id == "call-1"
    roles = list(Message.objects.filter(conversation__session_id=SESSION)
                 .order_by("seq").values_list("role", flat=True))  # fmt: skip
    assert roles == ["user", "user", "assistant", "assistant"]
    context = MessagePart.objects.get(text_content__startswith="<session_context>")
    assert context.is_synthetic is True  # Gemini's own context, not typed by the user
    assert report.notes["skipped_records"]["tool results repeated from their calls"] == 1


def test_a_repeated_result_that_differs_from_its_call_is_kept(tmp_path, user):
    records = gemini_061_log()
    changed = [_tool_result("call-1", "a.py\nb.py\nc.py")]
    records = [dict(r, content=changed) if r.get("id") == "u2" else r for r in records]
    path = write_jsonl(tmp_path / "chats" / "session-x.jsonl", records)
    import_file(format="gemini", path=path, owner=user)
    assert (
        MessagePart.objects.filter(tool_output__contains="c.py", message__role="tool").count() == 1
    )


def test_lcm_eval_capture_counts_a_gemini_jsonl_session(tmp_path, user):
    figures = evaluate_file(gemini_home(tmp_path), user)
    assert figures.format == "gemini"
    # c0, u1, g1, g2 (u2 only sends g1's result back to the model)
    assert (figures.stored, figures.main_line, figures.said) == (4, 4, 4)
    assert figures.tool_calls == figures.tool_paired == 1
    assert figures.second_import_added == 0
