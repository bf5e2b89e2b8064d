"""Transcript imports: Claude Code sessions, Anthropic and OpenAI arrays, generic JSONL."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from conversations.models import Conversation, Message, MessagePart
from importers.services import import_file
from integrity.checks import Scope
from integrity.report import scan
from largefiles.models import LargeFile
from tests.importers.conftest import FIXTURES

SESSION = "7b3e9c1a-4f2d-4e8b-9a61-2c5d8e0f1a37"


def _import(user, fmt, path, **kwargs):
    return import_file(format=fmt, path=path, owner=user, **kwargs)


def _parts(message):
    return list(MessagePart.objects.filter(message=message).order_by("ordinal"))


@pytest.fixture
def claude(user):
    return _import(user, "claude-code", FIXTURES / "claude_code_session.jsonl")


def test_claude_code_maps_main_line_branch_and_sidechain_to_conversations(user, claude):
    sessions = {c.session_id: c for c in claude.conversations}
    branch = next(s for s in sessions if ":branch:" in s)
    sidechain = next(s for s in sessions if ":sidechain:" in s)
    assert set(sessions) == {SESSION, branch, sidechain}
    main = Conversation.objects.get(owner=user, session_id=SESSION)
    assert main.title == "Fixing module guards"
    # 12 rounds of 4 records, 2 compactions (boundary + summary), the edited prompt, and
    # the 4 inserted records of which 3 are messages (the queue operation is not).
    assert Message.objects.filter(conversation=main).count() == 12 * 4 + 2 * 2 + 4
    side = Message.objects.filter(conversation__session_id=sidechain).order_by("seq")
    assert [m.content for m in side] == ["Search the tests for m2.", "Found 3 tests."]
    abandoned = Message.objects.filter(conversation__session_id=branch).order_by("seq")
    assert abandoned.last().content == "First attempt, abandoned."
    assert claude.notes["skipped_records"] == {"queue-operation": 1, "file-history-snapshot": 1}


def test_claude_code_keeps_compactions_tool_use_reasoning_images_and_unknown_blocks(user, claude):
    main = Conversation.objects.get(owner=user, session_id=SESSION)
    compactions = MessagePart.objects.filter(message__conversation=main, part_type="compaction")
    assert compactions.count() == 2
    assert sorted(p.compaction_auto for p in compactions) == [False, True]
    assert all(p.message.role == "system" for p in compactions)
    summaries = [
        p
        for p in MessagePart.objects.filter(message__conversation=main, part_type="text")
        if (p.metadata or {}).get("compact_summary")
    ]
    assert len(summaries) == 2
    call = MessagePart.objects.get(
        message__conversation=main, tool_call_id="toolu_00000003", tool_input__isnull=False
    )
    assert (call.tool_name, call.tool_input) == ("Read", {"file_path": "/home/dev/project/m3.py"})
    result = MessagePart.objects.get(
        message__conversation=main, tool_call_id="toolu_00000003", tool_output__isnull=False
    )
    assert result.message.role == "tool"
    assert result.tool_name == "Read"
    assert result.tool_output.startswith("    0\tdef f_3_0(x)")
    thinking = _parts(call.message)[0]
    assert (thinking.part_type, thinking.text_content) == ("reasoning", "Need to read m3.py.")
    assert thinking.metadata["signature"] == "sig"
    image = MessagePart.objects.get(message__conversation=main, part_type="file")
    assert image.file_mime == "image/png"
    assert image.file_url.startswith("data:image/png;base64,iVBORw0KGgo")
    unknown = MessagePart.objects.get(message__conversation=main, metadata__has_key="unknown_block")
    assert unknown.metadata["unknown_block"]["type"] == "container_upload"
    redacted = MessagePart.objects.get(
        message__conversation=main, metadata__block="redacted_thinking"
    )
    assert redacted.part_type == "reasoning"
    first = Message.objects.get(conversation=main, seq=1)
    assert first.created_at.isoformat() == "2026-03-01T09:00:01+00:00"
    assert first.external_id.startswith("claude-code:")


def test_a_malformed_line_is_reported_with_its_number_and_stops_nothing(user, claude):
    assert [e["line"] for e in claude.errors] == [22]
    assert claude.errors[0]["message"].startswith("not valid JSON")
    assert Message.objects.filter(conversation__owner=user).count() == sum(
        c.counts["messages"] for c in claude.conversations
    )


def test_reimporting_a_claude_code_session_adds_nothing_and_integrity_is_clean(user, claude):
    before = Message.objects.count(), MessagePart.objects.count()
    again = _import(user, "claude-code", FIXTURES / "claude_code_session.jsonl")
    assert again.totals()["messages"] == 0
    assert (Message.objects.count(), MessagePart.objects.count()) == before
    assert scan(Scope(None)).total_problems == 0


def test_a_session_that_went_on_imports_only_its_new_records(user, tmp_path):
    from benchmarks.synthetic import claude_code_session

    records = claude_code_session(rounds=6, session_id="grow")
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:12]))
    first = _import(user, "claude-code", path)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    second = _import(user, "claude-code", path)
    main = Conversation.objects.get(owner=user, session_id="grow")
    total = Message.objects.filter(conversation=main).count()
    assert (
        first.conversations[0].counts["messages"] + second.conversations[0].counts["messages"]
        == total
    )
    assert second.conversations[0].counts["messages"] > 0


def test_a_large_tool_output_in_a_transcript_is_intercepted(user, tmp_path, settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 2000
    big = "\n".join(f"row {i}, value {i * 7}" for i in range(3000))
    lines = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_big", "name": "dump", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_big", "content": big}],
        },
    ]
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = _import(user, "jsonl", path)
    assert report.totals()["large_files"] == 1
    stored = LargeFile.objects.get()
    assert stored.byte_size == len(big.encode())
    result = MessagePart.objects.get(tool_call_id="toolu_big", tool_output__isnull=False)
    assert result.tool_output.startswith(f"[LCM Tool Output: {stored.id} | dump |")


def test_anthropic_messages_import_with_system_tools_and_raw_blocks(user):
    report = _import(user, "anthropic", FIXTURES / "anthropic_messages.json")
    assert report.errors == [{"line": 7, "message": "role 'tool' is not user or assistant"}]
    conversation = Conversation.objects.get(owner=user, session_id="anthropic_messages")
    messages = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[0].content == "You are a careful release engineer."
    result = _parts(messages[3])[0]
    assert (result.tool_name, result.tool_output) == ("read_log", "error: linker OOM at stage 3")
    user_parts = _parts(messages[5])
    assert [p.part_type for p in user_parts] == ["text", "file", "text"]
    assert user_parts[1].file_url == "https://example.com/graphs/mem.png"
    assert user_parts[2].metadata["unknown_block"]["type"] == "search_result"
    again = _import(user, "anthropic", FIXTURES / "anthropic_messages.json")
    assert again.totals()["messages"] == 0


def test_openai_chat_completions_import(user):
    report = _import(user, "openai", FIXTURES / "openai_chat.json", session_id="chat-1")
    assert report.errors == [
        {"line": 6, "message": "an item must be a JSON object"},
        {"line": 7, "message": "role 'wizard' is not system, developer, user, assistant or tool"},
    ]
    messages = list(Message.objects.filter(conversation__session_id="chat-1").order_by("seq"))
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert _parts(messages[0])[0].metadata["role"] == "developer"
    image = _parts(messages[1])[1]
    assert (image.part_type, image.file_mime) == ("file", "image/png")
    call = _parts(messages[2])[0]
    assert (call.tool_call_id, call.tool_name, call.tool_input) == (
        "call_abc123",
        "get_weather",
        {"city": "Oslo"},
    )
    output = _parts(messages[3])[0]
    assert (output.tool_name, output.tool_output) == (
        "get_weather",
        '{"temp_c": -3, "sky": "snow"}',
    )


def test_openai_responses_input_import(user):
    report = _import(user, "openai", FIXTURES / "openai_responses.json", session_id="resp-1")
    assert report.errors == [{"line": 7, "message": "a function_call without call_id"}]
    messages = list(Message.objects.filter(conversation__session_id="resp-1").order_by("seq"))
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "assistant",
        "tool",
        "assistant",
        "assistant",
    ]
    reasoning = _parts(messages[2])[0]
    assert (reasoning.part_type, reasoning.text_content) == ("reasoning", "Look up the invoice.")
    assert reasoning.metadata["item"]["encrypted_content"] == "gAAAAABo_encrypted"
    assert messages[2].external_id == "rs_68a1"
    assert _parts(messages[3])[0].tool_input == {"number": "INV-2211"}
    assert _parts(messages[4])[0].tool_name == "lookup_invoice"
    assert _parts(messages[6])[0].metadata["unknown_block"]["type"] == "web_search_call"


def test_generic_jsonl_import_keeps_times_ids_and_reports_bad_lines(user):
    report = _import(user, "jsonl", FIXTURES / "generic.jsonl")
    assert [e["line"] for e in report.errors] == [6, 7]
    assert report.errors[1]["message"] == (
        "role 'narrator' is not one of: system, user, assistant, tool"
    )
    messages = list(Message.objects.filter(conversation__session_id="generic").order_by("seq"))
    assert [m.external_id for m in messages] == ["m-1", "m-2", "m-3", "m-4", "jsonl:line:5"]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert messages[3].created_at.isoformat() == "2026-02-03T10:02:00+00:00"
    assert _parts(messages[1])[1].tool_input == {"service": "payments", "env": "staging"}


def test_a_refused_line_leaves_nothing_of_itself(user, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": "ok"})
        + "\n"
        + json.dumps(
            {
                "role": "user",
                "content": "x",
                "parts": [{"part_type": "tool", "tool_call_id": "c" * 300}],
            }
        )
        + "\n"
    )
    report = _import(user, "jsonl", path)
    assert report.errors == [
        {"line": 2, "message": "parts[0].tool_call_id must be at most 255 characters"}
    ]
    assert list(Message.objects.values_list("content", flat=True)) == ["ok"]


def test_dry_run_of_a_transcript_writes_nothing(user, capsys):
    call_command(
        "lcm_import",
        "claude-code",
        str(FIXTURES / "claude_code_session.jsonl"),
        "--user",
        "owner",
        "--dry-run",
        "--json",
    )
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] is True
    assert data["totals"]["messages"] == 56 + 6 + 2
    assert data["errors"][0]["line"] == 22
    assert Conversation.objects.count() == 0
    assert Message.objects.count() == 0


def test_the_import_command_names_an_unknown_user(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("lcm_import", "jsonl", str(FIXTURES / "generic.jsonl"), "--user", "ghost")


def test_an_imported_session_compacts_greps_and_expands_like_native_data(
    user, small_chunks, api, tmp_path
):
    from benchmarks.synthetic import claude_code_session
    from compaction.engine import compact_conversation

    records = claude_code_session(rounds=40, session_id="native-like")
    path = tmp_path / "native-like.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    _import(user, "claude-code", path)
    main = Conversation.objects.get(owner=user, session_id="native-like")
    result = compact_conversation(conversation_id=main.pk, mode="full")
    assert result.status == "compacted"
    hits = api.post(
        "/api/v1/grep/",
        {"query": "RND-00003", "mode": "regex", "conversation_id": main.pk},
        format="json",
    ).json()["results"]
    message_hits = [h for h in hits if h["type"] == "message"]
    assert len(message_hits) == 1
    covering = message_hits[0]["covered_by"]
    assert covering is not None
    expanded = api.post(
        "/api/v1/expand/",
        {"summary_id": covering, "depth": 8, "include_messages": True, "token_cap": 10**6},
        format="json",
    ).json()
    assert message_hits[0]["id"] in [m["id"] for m in expanded["messages"]]
    assert scan(Scope(main.pk)).total_problems == 0
