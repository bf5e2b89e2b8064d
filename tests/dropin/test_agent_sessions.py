"""One agent session seen through the drop-in and by capture (the watcher's importer of its
session file) is stored once, whichever comes first (importers/join.py,
dropin/agent_sessions.py): Claude Code on the Anthropic wire (its session id in
`metadata.user_id`, joined by tool_use ids and texts), Codex on the Responses wire (its
`prompt_cache_key`, joined by call ids).

The session files are small files in the agents' shapes written by the tests
(tests/importers/agent_sessions.py); the requests go through the official SDKs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from conversations.models import Conversation, Message
from conversations.models import MessagePart as Part
from dropin.models import Thread
from importers.join import part_keys
from importers.models import JoinedRecord
from importers.services import import_file
from tests.importers.agent_sessions import (
    SESSION,
    assistant,
    cc,
    cx,
    item,
    tool_result,
    tool_use,
    write_jsonl,
)
from tests.support.fake_messages_api import message, text_block, tool_use_block
from tests.support.fake_responses_api import function_call_item, responses_object

BASH = {"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}
REMINDER = "<system-reminder>\nToday's date is 2026-05-01.\n</system-reminder>"


def metadata(session: str = SESSION) -> dict:
    return {"user_id": json.dumps({"device_id": "0", "session_id": session})}


def keys_held(conversation_id: int) -> Counter:
    """How many messages of the conversation hold each content key: 1 each when the
    session is stored once."""
    held: Counter = Counter()
    parts = Part.objects.filter(message__conversation_id=conversation_id).values(
        "message_id", "part_type", "metadata", "tool_call_id", "tool_input", "tool_output",
        "tool_error", "text_content",
    )  # fmt: skip
    seen = set()
    for row in parts:
        for key in part_keys(row["part_type"], row):
            if (row["message_id"], key) not in seen:
                seen.add((row["message_id"], key))
                held[key] += 1
    return held


# -- Claude Code --------------------------------------------------------------------------


def claude_code_file(tmp_path):
    """The session file Claude Code writes for the two requests below: one record per
    block of an answer, a tool result record, and an attachment (no message)."""
    records = [
        cc("u01", None, "user", "list the files"),
        cc("t02", "u01", "attachment", attachment={"type": "todo"}),
        assistant("a03", "t02", [{"type": "text", "text": "I'll list them."}], "1"),
        assistant("a04", "a03", [tool_use("toolu_01")], "1"),
        cc("u05", "a04", "user", [tool_result("toolu_01", "a.txt\nb.txt")]),
        assistant("a06", "u05", [{"type": "text", "text": "Two files: a.txt and b.txt."}], "2"),
    ]
    return write_jsonl(tmp_path / f"{SESSION}.jsonl", records)


def claude_code_requests(claude, upstreams) -> None:
    """The two requests of the session through the drop-in (its answers are what the
    session file holds)."""
    upstreams.messages.enqueue(
        message(
            content=[
                text_block("I'll list them."),
                tool_use_block("Bash", {"command": "ls"}, id="toolu_01"),
            ]
        ),
        message("Two files: a.txt and b.txt."),
    )
    first = {
        "role": "user",
        "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": "list the files"}],
    }
    claude.messages.create(
        model="claude-opus-4-8", max_tokens=1000, messages=[first], tools=[BASH],
        metadata=metadata(),
    )  # fmt: skip
    history = [
        first,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll list them."},
                {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.txt\nb.txt"}
            ],
        },
    ]
    claude.messages.create(
        model="claude-opus-4-8", max_tokens=1000, messages=history, tools=[BASH],
        metadata=metadata(),
    )  # fmt: skip


def the_session(user) -> Conversation:
    conversations = Conversation.objects.filter(owner=user)
    assert list(conversations.values_list("session_id", flat=True)) == [SESSION]
    return conversations.get()


def test_a_claude_code_session_seen_by_the_drop_in_first_is_not_stored_again_by_its_import(
    upstreams, claude, caller, tmp_path
):
    claude_code_requests(claude, upstreams)
    conversation = the_session(caller[0])
    assert Thread.objects.get().conversation_id == conversation.pk
    before = list(Message.objects.filter(conversation=conversation).values_list("pk", "content"))
    assert len(before) == 4  # prompt (with its reminder), answer, tool result, answer

    report = import_file(format="claude-code", path=claude_code_file(tmp_path), owner=caller[0])
    again = import_file(format="claude-code", path=claude_code_file(tmp_path), owner=caller[0])

    assert report.conversations[0].counts["messages"] == 0
    assert again.conversations[0].counts["messages"] == 0
    stored = list(Message.objects.filter(conversation=conversation).values_list("pk", "content"))
    assert stored == before  # nothing added, nothing changed
    assert set(keys_held(conversation.pk).values()) == {1}
    joined = JoinedRecord.objects.filter(conversation=conversation)
    assert sorted(joined.values_list("source_id", flat=True)) == [
        f"claude-code:{u}" for u in ("a03", "a04", "a06", "u01", "u05")
    ]
    # The file's facts sit beside the drop-in's messages: the record's uuid and time.
    prompt = joined.get(source_id="claude-code:u01")
    assert prompt.facts["source"]["uuid"] == "u01"
    assert prompt.facts["created_at"].startswith("2026-05-01T10:00:01")
    assert prompt.message.external_id.startswith("dropin:")
    # The answer's two records (one per block) are the drop-in's one answer message.
    assert (
        joined.get(source_id="claude-code:a03").message_id
        == joined.get(source_id="claude-code:a04").message_id
    )
    assert conversation.origin.cwd == "/work/app"  # the session's facts from the file


def test_a_claude_code_session_imported_first_is_continued_by_the_drop_in_without_copies(
    upstreams, claude, caller, tmp_path
):
    import_file(format="claude-code", path=claude_code_file(tmp_path), owner=caller[0])
    conversation = the_session(caller[0])
    imported = Message.objects.filter(conversation=conversation).count()
    assert imported == 5

    claude_code_requests(claude, upstreams)

    assert Thread.objects.get().conversation_id == conversation.pk
    new = Message.objects.filter(conversation=conversation, seq__gt=imported)
    # Only what the file does not hold: the reminder Claude Code added to the prompt.
    assert [(m.role, m.content) for m in new] == [("user", REMINDER)]
    assert set(keys_held(conversation.pk).values()) == {1}
    # The next request continues the thread (nothing forked, nothing stored twice).
    thread = Thread.objects.get()
    assert thread.message_count == 4 and thread.parent_id is None
    # A second import of the grown file adds nothing either.
    again = import_file(format="claude-code", path=claude_code_file(tmp_path), owner=caller[0])
    assert again.conversations[0].counts["messages"] == 0


def test_the_watcher_reading_an_answer_before_the_drop_in_stores_it_leaves_one_copy(
    upstreams, claude, caller, tmp_path
):
    """Interleaved: the file's first records are imported between the drop-in's requests
    (the watcher read the answer's first block before the drop-in stored the answer)."""
    records = [
        cc("u01", None, "user", "list the files"),
        assistant("a03", "u01", [{"type": "text", "text": "I'll list them."}], "1"),
    ]
    partial = write_jsonl(tmp_path / "partial" / f"{SESSION}.jsonl", records)
    import_file(format="claude-code", path=partial, owner=caller[0])
    claude_code_requests(claude, upstreams)
    import_file(format="claude-code", path=claude_code_file(tmp_path), owner=caller[0])

    conversation = the_session(caller[0])
    assert set(keys_held(conversation.pk).values()) == {1}
    # The answer's tool call, not in the file yet when the drop-in stored the answer, is
    # stored by the drop-in alone; its text block is the imported record's.
    answer_parts = Part.objects.filter(
        message__conversation=conversation, tool_call_id="toolu_01", tool_input__isnull=False
    )
    assert answer_parts.count() == 1


# -- Codex (Responses wire) ---------------------------------------------------------------

CODEX_SESSION = "019b0000-bbbb-7000-8000-000000000002"
SHELL = {
    "type": "function",
    "name": "shell_command",
    "description": "run",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def codex_user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


CALL = {
    "type": "function_call",
    "name": "shell_command",
    "arguments": json.dumps({"command": "pytest -q"}),
    "call_id": "call_7",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_7", "output": "1 passed"}


def codex_rollout(tmp_path):
    records = [
        cx("session_meta", {"id": CODEX_SESSION, "cwd": "/work/api", "cli_version": "0.171.0"}),
        item(codex_user("Run the tests."), 1),
        item(CALL, 2),
        item(OUTPUT, 3),
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "All tests pass."}],
            },
            4,
        ),
    ]
    return write_jsonl(tmp_path / f"rollout-2026-05-02T09-00-00-{CODEX_SESSION}.jsonl", records)


def codex_requests(oai, upstreams) -> None:
    call = function_call_item("shell_command", {"command": "pytest -q"}, call_id="call_7")
    upstreams.responses.enqueue(
        responses_object(output=[call]), responses_object("All tests pass.")
    )
    first = [codex_user("Run the tests.")]
    answer = oai.responses.create(
        model="gpt", input=first, tools=[SHELL], store=False, prompt_cache_key=CODEX_SESSION
    )
    items = [i.model_dump(exclude_none=True) for i in answer.output]
    oai.responses.create(
        model="gpt", input=[*first, *items, OUTPUT], tools=[SHELL], store=False,
        prompt_cache_key=CODEX_SESSION,
    )  # fmt: skip


@pytest.mark.parametrize("first", ["drop-in", "import"])
def test_a_codex_session_seen_from_both_sides_is_stored_once(
    upstreams, oai, caller, tmp_path, first
):
    path = codex_rollout(tmp_path)
    if first == "drop-in":
        codex_requests(oai, upstreams)
        import_file(format="codex", path=path, owner=caller[0])
    else:
        import_file(format="codex", path=path, owner=caller[0])
        codex_requests(oai, upstreams)
    conversations = Conversation.objects.filter(owner=caller[0])
    assert list(conversations.values_list("session_id", flat=True)) == [CODEX_SESSION]
    conversation = conversations.get()
    held = keys_held(conversation.pk)
    assert set(held.values()) == {1}
    assert {"call:call_7", "result:call_7"} <= set(held)
    assert Thread.objects.get().conversation_id == conversation.pk
    again = import_file(format="codex", path=path, owner=caller[0])
    assert again.conversations[0].counts["messages"] == 0


# -- /compact typed by the user (Claude Code) -------------------------------------------------

COMPACT_PROMPT = (
    "Your task is to create a detailed summary of the conversation so far, paying close "
    "attention to the user's explicit requests and your previous actions.\n\n"
    "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools."
)
SUMMARY = (
    "<analysis>The user wanted the listing.</analysis>\n<summary>\n"
    "1. Primary Request: list the files.\n2. Current Work: done.\n</summary>"
)
CONTINUED = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\nSummary:\n1. Primary Request: list the files.\n"
    "2. Current Work: done."
)


def send(claude, messages, *, tools=(BASH,)):
    raw = claude.messages.with_raw_response.create(
        model="claude-opus-4-8", max_tokens=1000, messages=messages, tools=list(tools),
        metadata=metadata(),
    )  # fmt: skip
    return raw.headers


def compact_flow(claude, upstreams, tools=(BASH,)):
    """The session's two requests, then `/compact`, then two requests after it; (the
    answers' headers, the last request's messages, how many messages came before)."""
    claude_code_requests(claude, upstreams)
    before = Message.objects.count()  # prompt, answer, tool result, answer
    history = [
        {"role": "user", "content": [
            {"type": "text", "text": REMINDER}, {"type": "text", "text": "list the files"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "I'll list them."}, {
            "type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.txt\nb.txt"}]},
        {"role": "assistant", "content": "Two files: a.txt and b.txt."},
    ]  # fmt: skip
    upstreams.messages.enqueue(message(SUMMARY), message("Added."), message("You're welcome."))
    compact = [*history, {"role": "user", "content": COMPACT_PROMPT}]
    headers = [send(claude, compact, tools=tools)]
    after = [{"role": "user", "content": [
        {"type": "text", "text": CONTINUED}, {"type": "text", "text": "now add a test"}]}]  # fmt: skip
    headers.append(send(claude, after))
    after += [
        {"role": "assistant", "content": "Added."},
        {"role": "user", "content": "thanks"},
    ]
    headers.append(send(claude, after))
    return headers, after, before


@pytest.mark.parametrize("tools", [(BASH,), ()], ids=["with-tools", "without-tools"])
def test_compact_typed_by_the_user_is_stored_as_an_agent_compaction_and_the_session_goes_on(
    upstreams, claude, caller, tools
):
    from conversations.models import Summary
    from importers.models import AgentCompactionRepair, ImportedSummary

    headers, after, before = compact_flow(claude, upstreams, tools)

    assert [h["x-lcm-forked"] for h in headers] == ["false"] * 3
    thread = Thread.objects.get()
    assert thread.key == f"session:{SESSION}" and thread.parent_id is None
    conversation_id = thread.conversation_id
    assert {h["x-lcm-conversation-id"] for h in headers} == {str(conversation_id)}
    stored = list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("role", "content")
    )
    # Every message once: the four before, the compaction prompt and its answer, then the
    # requests after it (the summary with the new prompt, and what followed).
    assert len(stored) == before + 2 + 4
    assert stored[before] == ("user", COMPACT_PROMPT)
    assert stored[before + 1][1] == SUMMARY
    assert stored[-1] == ("assistant", "You're welcome.")
    assert thread.message_count == len(after) + 1

    summary = Summary.objects.get(conversation_id=conversation_id)
    assert summary.model == "claude-code (agent compaction)"
    assert "1. Primary Request: list the files." in summary.content
    assert "<analysis>" not in summary.content
    covered = Message.objects.filter(summary_links__summary=summary).order_by("seq")
    assert list(covered.values_list("seq", flat=True)) == list(range(1, before + 1))
    source = ImportedSummary.objects.get(summary=summary).source
    assert source["kind"] == "agent_compaction" and source["from"] == "drop-in"
    assert AgentCompactionRepair.objects.filter(summary=summary).exists()


def test_a_request_that_only_looks_continued_without_a_session_history_starts_a_thread(
    upstreams, claude, caller
):
    """The summary mark alone continues nothing: a new session beginning with it is a new
    thread (nothing to rebase), stored as it came."""
    upstreams.messages.enqueue(message("ok"))
    send(claude, [{"role": "user", "content": CONTINUED}])
    thread = Thread.objects.get()
    assert thread.message_count == 2
    assert not JoinedRecord.objects.exists()


# -- the watcher importing while the drop-in's requests arrive (PostgreSQL) ----------------


def turn_records(k: int, parent: str | None) -> list[dict]:
    n = 10 * k
    return [
        cc(f"u{n + 1:02d}", parent, "user", f"step {k}: list the files"),
        assistant(f"a{n + 2:02d}", f"u{n + 1:02d}", [{"type": "text", "text": f"Listing {k}."}], f"{k}a"),
        assistant(f"a{n + 3:02d}", f"a{n + 2:02d}", [tool_use(f"toolu_{k}")], f"{k}a"),
        cc(f"u{n + 4:02d}", f"a{n + 3:02d}", "user", [tool_result(f"toolu_{k}", f"file{k}.txt")]),
        assistant(f"a{n + 5:02d}", f"u{n + 4:02d}", [{"type": "text", "text": f"Done {k}."}], f"{k}b"),
    ]  # fmt: skip


@pytest.mark.postgres
def test_the_watcher_importing_while_drop_in_requests_arrive_stores_the_session_once(
    upstreams, claude, caller, tmp_path
):
    import threading

    from django.db import connection

    turns = 6
    path = tmp_path / f"{SESSION}.jsonl"
    records: list[dict] = []
    history: list[dict] = []
    errors: list[BaseException] = []
    for k in range(turns):
        upstreams.messages.enqueue(
            message(content=[text_block(f"Listing {k}."),
                             tool_use_block("Bash", {"command": "ls"}, id=f"toolu_{k}")]),
            message(f"Done {k}."),
        )  # fmt: skip

    def watcher(k: int, start: threading.Barrier) -> None:
        try:
            start.wait()
            for _ in range(3):  # the watcher imports the file as it grows, again and again
                import_file(format="claude-code", path=path, owner=caller[0])
        except BaseException as error:  # noqa: BLE001 (reported by the test)
            errors.append(error)
        finally:
            connection.close()

    for k in range(turns):
        records += turn_records(k, records[-1]["uuid"] if records else None)
        write_jsonl(path, records)
        start = threading.Barrier(2, timeout=30)
        thread = threading.Thread(target=watcher, args=(k, start))
        thread.start()
        start.wait()
        history.append({"role": "user", "content": f"step {k}: list the files"})
        send(claude, history)
        history += [
            {"role": "assistant", "content": [
                {"type": "text", "text": f"Listing {k}."},
                {"type": "tool_use", "id": f"toolu_{k}", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": f"file{k}.txt"}]},
        ]  # fmt: skip
        send(claude, history)
        history.append({"role": "assistant", "content": f"Done {k}."})
        thread.join(60)
    import_file(format="claude-code", path=path, owner=caller[0])

    assert errors == []
    conversation = the_session(caller[0])
    held = keys_held(conversation.pk)
    assert set(held.values()) == {1}
    assert len(held) == 5 * turns  # prompt, text, call, result, text per turn
    assert Thread.objects.get().conversation_id == conversation.pk
    # Every record of the file is stored or joined, once.
    stored = set(
        Message.objects.filter(conversation=conversation).values_list("external_id", flat=True)
    )
    joined = set(
        JoinedRecord.objects.filter(conversation=conversation).values_list("source_id", flat=True)
    )
    file_ids = {f"claude-code:{r['uuid']}" for r in records}
    assert file_ids <= stored | joined


def test_the_compacted_session_file_imported_after_the_drop_in_adds_no_second_compaction(
    upstreams, claude, caller, tmp_path
):
    """Claude Code's file after `/compact`: the boundary, its summary record, then the
    session goes on. Imported after the drop-in saw it all: the boundary is the one record
    only the file holds; the agent compaction is the drop-in's, not linked twice."""
    from conversations.models import Summary

    compact_flow(claude, upstreams)
    records = [
        cc("u01", None, "user", "list the files"),
        assistant("a03", "u01", [{"type": "text", "text": "I'll list them."}], "1"),
        assistant("a04", "a03", [tool_use("toolu_01")], "1"),
        cc("u05", "a04", "user", [tool_result("toolu_01", "a.txt\nb.txt")]),
        assistant("a06", "u05", [{"type": "text", "text": "Two files: a.txt and b.txt."}], "2"),
        cc("s07", None, "system", subtype="compact_boundary", content="Conversation compacted",
           logicalParentUuid="a06", compactMetadata={"trigger": "manual", "preTokens": 900}),
        cc("u08", "s07", "user", CONTINUED, isCompactSummary=True),
        cc("u09", "u08", "user", "now add a test"),
        assistant("a10", "u09", [{"type": "text", "text": "Added."}], "3"),
        cc("u11", "a10", "user", "thanks"),
        assistant("a12", "u11", [{"type": "text", "text": "You're welcome."}], "4"),
    ]  # fmt: skip
    conversation = Thread.objects.get().conversation
    count = Message.objects.filter(conversation=conversation).count()
    path = write_jsonl(tmp_path / f"{SESSION}.jsonl", records)

    report = import_file(format="claude-code", path=path, owner=caller[0])

    assert report.conversations[0].counts["messages"] == 1  # the boundary
    assert Message.objects.filter(conversation=conversation).count() == count + 1
    assert set(keys_held(conversation.pk).values()) == {1}
    assert Summary.objects.filter(conversation=conversation).count() == 1


# -- the real CLI's shapes (Claude Code 2.1.197, recorded by scripts/claude_code_join_e2e.py) --


def recorded_compaction() -> tuple[dict, dict]:
    folder = Path(__file__).parent / "data" / "claude_code_compact"
    return tuple(
        json.loads((folder / f"{name}.json").read_text())
        for name in ("compact_request", "after_compact")
    )


def post_body(live_server, token: str, body: dict):
    import httpx

    headers = {"x-api-key": "sk-ant-own", "X-LCM-Token": token, "anthropic-version": "2023-06-01"}
    with httpx.Client(timeout=30) as client:
        return client.post(f"{live_server.url}/anthropic/v1/messages", json=body, headers=headers)


def test_the_real_clis_compact_request_and_the_session_after_it_stay_on_one_thread(
    upstreams, live_server, caller
):
    """Claude Code's real shapes around `/compact`: the tool loop whose Edit call comes back
    with `"replace_all": false` added by the CLI; the compaction request, which carries an
    older cut of the history with the prompt merged into the last user message; the request
    after it, which begins with the summary and keeps the last exchange. One thread, never
    forked; the compaction linked; nothing stored twice."""
    from conversations.models import Summary

    compact, after = recorded_compaction()
    history = compact["messages"][:-1]  # up to the answer of the tool loop
    base = {k: v for k, v in compact.items() if k != "messages"}
    statuses, forked = [], []

    def send_with_answer(messages, answer):
        upstreams.messages.enqueue(message(content=answer))
        response = post_body(live_server, caller[1], {**base, "messages": messages})
        statuses.append(response.status_code)
        forked.append(response.headers.get("x-lcm-forked"))

    for k, sent in enumerate(history):
        if sent["role"] != "assistant":
            continue
        answer = json.loads(json.dumps(sent["content"]))
        for block in answer:
            block.pop("cache_control", None)
            if block.get("type") == "tool_use":
                block["input"].pop("replace_all", None)  # as the upstream sent it
        send_with_answer(history[:k], answer)
    question = {"role": "user", "content": [compact["messages"][-1]["content"][0]]}
    send_with_answer([*history, question], [text_block("Answer to: What did you just do?")])
    send_with_answer(compact["messages"], [text_block(SUMMARY)])
    send_with_answer(after["messages"], [text_block("Answer to: Say what the summary kept.")])

    assert statuses == [200] * len(statuses)
    assert set(forked) == {"false"}
    main = Thread.objects.exclude(key__contains=":side:")
    assert main.count() == 1 and main.get().parent_id is None
    conversation_id = main.get().conversation_id
    stored = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    prompt = stored.get(content__startswith="CRITICAL: Respond with TEXT ONLY")
    assert "What did you just do?" not in prompt.content  # stored once, before it
    assert stored.filter(content__startswith="What did you just do?").count() == 1
    summary = Summary.objects.get(conversation_id=conversation_id)
    covered = Message.objects.filter(summary_links__summary=summary)
    assert covered.count() == prompt.seq - 1  # every message before the prompt
    # After the compaction: the summary and what followed, appended once; the last answer,
    # which Claude Code resends after its summary, is joined with the one stored before.
    assert stored.filter(content__contains="Answer to: What did you just do?").count() == 1
    assert stored.last().content == "Answer to: Say what the summary kept."
    assert main.get().message_count == len(after["messages"]) + 1
