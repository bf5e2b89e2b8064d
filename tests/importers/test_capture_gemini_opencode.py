"""Gemini CLI chat records (JSON and JSONL) and OpenCode sessions (opencode.db, the older
storage/ tree, `opencode export` JSON): tool calls with their results, reasoning, system
notices, metadata, OpenCode's compaction in the DAG, idempotent re-imports."""

from __future__ import annotations

import json
import time

import pytest

from conversations.models import ConversationOrigin, Message, MessagePart, Summary
from importers.models import ImportedConversation
from importers.services import import_file
from retrieval.selectors import expand_for_user
from tests.importers.agent_sessions import (
    OC_SESSION,
    gemini_chat,
    opencode_session,
    write_jsonl,
    write_opencode_db,
    write_opencode_storage,
)

# -- Gemini ---------------------------------------------------------------------------


@pytest.fixture
def chat(tmp_path):
    path = tmp_path / "myproject" / "chats" / "session-2026-05-03T08-00-gem0001.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(gemini_chat()))
    return path


def _parts(session_id, **filters):
    return MessagePart.objects.filter(message__conversation__session_id=session_id, **filters)


def test_a_gemini_chat_keeps_tool_calls_with_results_thoughts_and_notices(user, chat):
    report = import_file(format="gemini", path=chat, owner=user)
    messages = list(Message.objects.filter(conversation__session_id="gem-0001").order_by("seq"))
    assert [m.role for m in messages] == ["user", "assistant", "system", "system"]
    assert report.notes["skipped_records"] == {"message:mystery": 1}
    thought, text, tool = list(MessagePart.objects.filter(message=messages[1]).order_by("ordinal"))
    assert (thought.part_type, thought.text_content) == ("reasoning", "Listing\nUse ls.")
    assert text.text_content == "Here they are."
    assert (tool.tool_call_id, tool.tool_name, tool.tool_input) == (
        "ls-1",
        "list_directory",
        {"path": "."},
    )
    assert (tool.tool_output, tool.tool_status) == ("a.py", "success")
    assert (
        text.metadata == {"block": "string"}
        and thought.metadata["source"]["tokens"]["total"] == 110
    )
    notice = MessagePart.objects.get(message=messages[3])
    assert notice.metadata["gemini_type"] == "error"
    row = ConversationOrigin.objects.get(conversation__session_id="gem-0001")
    assert (row.agent, row.model) == ("gemini", "gemini-2.5-pro")
    facts = ImportedConversation.objects.get(conversation__session_id="gem-0001").metadata
    assert (facts["project"], facts["projectHash"]) == ("myproject", "ab" * 32)


def test_a_rewritten_gemini_chat_adds_only_its_new_messages(user, chat):
    import_file(format="gemini", path=chat, owner=user)
    again = import_file(format="gemini", path=chat, owner=user)
    assert again.totals()["messages"] == 0
    chat.write_text(json.dumps(gemini_chat(extra_messages=2)))
    grown = import_file(format="gemini", path=chat, owner=user)
    assert grown.totals()["messages"] == 2
    assert Message.objects.filter(conversation__session_id="gem-0001").count() == 6


def test_a_gemini_message_with_a_running_tool_call_waits_for_the_next_import(user, tmp_path):
    document = gemini_chat()
    document["messages"][1]["toolCalls"][0]["status"] = "executing"
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(document))
    first = import_file(format="gemini", path=path, owner=user)
    assert first.totals()["messages"] == 3
    document["messages"][1]["toolCalls"][0]["status"] = "success"
    path.write_text(json.dumps(document))
    second = import_file(format="gemini", path=path, owner=user)
    assert second.totals()["messages"] == 1
    assert _parts("gem-0001", part_type="tool").get().tool_output == "a.py"


def test_the_gemini_jsonl_log_rewrites_rewinds_and_patches(user, tmp_path):
    document = gemini_chat()
    header = {k: v for k, v in document.items() if k != "messages"}
    header["directories"] = ["/work/gem"]
    first, answer = document["messages"][0], document["messages"][1]
    retry = {"id": "m9", "timestamp": "2026-05-03T08:02:00Z", "type": "user", "content": "Again."}
    path = write_jsonl(
        tmp_path / "chat.jsonl",
        [
            header,
            first,
            dict(answer, content="draft"),
            answer,  # the same id rewritten whole: only this version is kept
            {"$rewindTo": "m2"},
            {"$set": {"summary": "Listing files", "messages": []}},
            retry,
        ],
        tail="{broken\n",
    )
    report = import_file(format="gemini", path=path, owner=user)
    assert [e["line"] for e in report.errors] == [8]
    texts = _parts("gem-0001", part_type="text").values_list("text_content", flat=True)
    assert sorted(texts) == ["Again.", "Here they are.", "List the files."]
    rewound = _parts("gem-0001", metadata__rewound=True).get()
    assert rewound.message.external_id == "gemini:gem-0001:m2"
    row = ConversationOrigin.objects.get(conversation__session_id="gem-0001")
    assert (row.cwd, row.conversation.title) == ("/work/gem", "Listing files")
    assert any(k.startswith("$set.messages") for k in report.notes["skipped_records"])


def _said(ident, kind, text):
    return {"id": ident, "timestamp": "2026-05-03T09:00:00Z", "type": kind, "content": text}


def test_a_gemini_compression_is_linked_to_the_messages_it_replaced(user, tmp_path):
    document = gemini_chat()
    header = {k: v for k, v in document.items() if k != "messages"}
    first, answer = document["messages"][0], document["messages"][1]
    late = _said("m6", "user", "Now delete a.py.")
    snapshot = [{"text": "<state_snapshot>The user listed the files.</state_snapshot>"}]
    summary = _said("s1", "user", snapshot)
    ack = _said("s2", "gemini", "Got it. Thanks for the additional context!")
    masked = dict(late, content="<tool_output_masked>")  # Gemini's own copy, changed
    records = [header, first, answer, late]
    records += [{"$set": {"messages": [summary, ack, masked]}}, _said("m7", "user", "Done?")]
    again_snapshot = _said("s3", "user", "<state_snapshot>a.py deleted</state_snapshot>")
    records += [
        {"$set": {"messages": [again_snapshot, dict(ack, id="s4"), _said("m7", "user", "Done?")]}}
    ]
    records += [{"$set": {"messages": [again_snapshot]}}]  # a turn rolled back: nothing new
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    report = import_file(format="gemini", path=path, owner=user)
    stored = Message.objects.filter(conversation__session_id="gem-0001").order_by("seq")
    names = [m.external_id.rsplit(":", 1)[1] for m in stored]
    assert names == ["m1", "m2", "m6", "s1", "s2", "m7", "s3", "s4"]
    assert stored[2].content == "Now delete a.py."  # the original, not Gemini's masked copy
    first_row, second_row = Summary.objects.filter(conversation__session_id="gem-0001")
    if first_row.import_source.source["at_external_id"] != "gemini:gem-0001:s1":
        first_row, second_row = second_row, first_row
    assert first_row.content == snapshot[0]["text"]
    assert first_row.model == "gemini (agent compaction)"
    assert _covered(first_row) == ["m1", "m2"]
    assert _covered(second_row) == ["m6", "s1", "s2"]  # m1, m2 had left the context already
    summaries = _parts("gem-0001", metadata__compression="summary")
    assert sorted(p.message.seq for p in summaries) == [stored[3].seq, stored[6].seq]
    assert (
        report.notes["skipped_records"][
            "$set.messages (Gemini's own context replaced; history kept)"
        ]
        == 1
    )
    assert report.ok
    again = import_file(format="gemini", path=path, owner=user)
    assert again.totals()["messages"] == again.totals()["summaries"] == 0
    assert Summary.objects.count() == 2


def _covered(summary):
    links = summary.message_links.order_by("ordinal")
    return [e.rsplit(":", 1)[1] for e in links.values_list("message__external_id", flat=True)]


# -- OpenCode -------------------------------------------------------------------------


def _check_opencode(user, report):
    assert [c.session_id for c in report.conversations] == [OC_SESSION]
    messages = list(Message.objects.filter(conversation__session_id=OC_SESSION).order_by("seq"))
    assert [m.external_id for m in messages] == [f"opencode:msg_{i:02d}" for i in range(1, 7)]
    tool = _parts(OC_SESSION, part_type="tool").get()
    assert (tool.tool_call_id, tool.tool_name, tool.tool_status) == ("call_r1", "read", "completed")
    assert (tool.tool_input, tool.tool_output, tool.tool_title) == (
        {"filePath": "SPEC.md"},
        "# Spec",
        "SPEC.md",
    )
    finish = _parts(OC_SESSION, part_type="step_finish").get()
    assert (finish.step_reason, finish.step_tokens_in, finish.step_tokens_out) == (
        "tool-calls",
        20,
        7,
    )
    assert _parts(OC_SESSION, part_type="patch").get().patch_files == ["SPEC.md"]
    assert _parts(OC_SESSION, part_type="file").get().file_name == "a.txt"
    unknown = _parts(OC_SESSION, metadata__has_key="unknown_block").get()
    assert unknown.metadata["unknown_block"]["type"] == "hologram"
    row = ConversationOrigin.objects.get(conversation__session_id=OC_SESSION)
    assert (row.agent, row.cwd, row.model) == ("opencode", "/work/site", "deepseek-v4")
    summary = Summary.objects.get(conversation__session_id=OC_SESSION)
    assert summary.model == "opencode (agent compaction)"
    assert summary.content == "Summary: SPEC.md was read."
    expanded = expand_for_user(user=user, summary_id=summary.pk, include_messages=True)
    assert [m["seq"] for m in expanded.messages] == [1, 2]  # not the compaction request


def test_an_opencode_database_imports_each_session_once(user, tmp_path):
    path = write_opencode_db(tmp_path / "opencode.db", [opencode_session()])
    _check_opencode(user, import_file(format="opencode", path=path, owner=user))
    again = import_file(format="opencode", path=path, owner=user)
    assert again.totals()["messages"] == again.totals()["summaries"] == 0


def test_the_older_storage_tree_imports_the_same(user, tmp_path):
    root = write_opencode_storage(tmp_path / "opencode", [opencode_session()])
    (root / "storage" / "part" / "msg_06" / "prt_bad.json").write_text("{nope")
    report = import_file(format="opencode", path=root, owner=user)
    assert len(report.errors) == 1 and "prt_bad.json" in report.errors[0]["message"]
    _check_opencode(user, report)


def test_opencode_export_output_imports_and_a_sub_task_names_its_parent(user, tmp_path):
    info, messages = opencode_session()
    info = dict(info, parentID="ses_parent")
    path = tmp_path / "export.json"
    path.write_text(
        json.dumps({"info": info, "messages": [{"info": m, "parts": p} for m, p in messages]})
    )
    _check_opencode(user, import_file(format="opencode", path=path, owner=user))
    row = ImportedConversation.objects.get(conversation__session_id=OC_SESSION)
    assert (row.metadata["parent_session"], row.metadata["line"]) == ("ses_parent", "subtask")


def test_an_answer_still_being_written_waits_for_the_next_import(user, tmp_path):
    info, messages = opencode_session()
    last, parts = messages[-1]
    now = int(time.time() * 1000)
    messages[-1] = (dict(last, time={"created": now}), parts)
    path = write_opencode_db(tmp_path / "opencode.db", [(info, messages)])
    report = import_file(format="opencode", path=path, owner=user)
    assert report.totals()["messages"] == 5
    assert "still being written" in next(iter(report.notes["skipped_records"]))


def test_records_of_odd_shapes_are_reported_never_a_crash(user, tmp_path):
    """A list where an object was due, a number where a string was: each such record is
    reported with its position and the rest imports."""
    from tests.importers.agent_sessions import claude_code_2x, codex_rollout

    claude = claude_code_2x()
    claude[2] = dict(claude[2], parentUuid=["not", "a", "uuid"])
    claude[5] = dict(claude[5], message=[1, 2])
    claude[6] = dict(claude[6], type={"odd": True})
    report = import_file(
        format="claude-code", path=write_jsonl(tmp_path / "c.jsonl", claude), owner=user
    )
    assert [e["line"] for e in report.errors] == [3, 6, 7]
    assert report.totals()["messages"] > 10
    codex = codex_rollout()
    codex[3] = dict(codex[3], payload={"type": "message", "role": "user", "content": 7})
    codex[4] = dict(codex[4], payload={"type": "user_message", "message": ["x"]})
    report = import_file(format="codex", path=write_jsonl(tmp_path / "r.jsonl", codex), owner=user)
    assert [e["line"] for e in report.errors] == [4, 5]
    document = gemini_chat()
    document["messages"][1]["toolCalls"] = 5
    document["messages"][0]["content"] = {"text": 3}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(document))
    report = import_file(format="gemini", path=path, owner=user)
    assert [e["line"] for e in report.errors] == [2]
    assert report.totals()["messages"] == 3
