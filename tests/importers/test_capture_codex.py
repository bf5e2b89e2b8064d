"""Codex CLI rollouts: response items to messages, calls paired with their outputs on
call_id, event repeats stored once, injected context synthetic, usage, metadata, and
Codex's own compaction linked in the summary DAG."""

from __future__ import annotations

import json

import pytest
import zstandard

from conversations.models import ConversationOrigin, Message, MessagePart, Summary
from importers.models import ImportedConversation, ImportedSummary
from importers.services import import_file
from retrieval.selectors import expand_for_user
from tests.importers.agent_sessions import codex_rollout, write_jsonl

SESSION = "019b0000-aaaa-7000-8000-000000000001"


@pytest.fixture
def rollout(tmp_path):
    return write_jsonl(tmp_path / f"rollout-2026-05-02T09-00-00-{SESSION}.jsonl", codex_rollout())


@pytest.fixture
def report(user, rollout):
    return import_file(format="codex", path=rollout, owner=user)


def _messages():
    return list(Message.objects.filter(conversation__session_id=SESSION).order_by("seq"))


def _tool_parts():
    return MessagePart.objects.filter(message__conversation__session_id=SESSION, part_type="tool")


def test_a_rollout_is_one_conversation_of_its_response_items(user, report):
    assert [c.session_id for c in report.conversations] == [SESSION]
    roles = [m.role for m in _messages()]
    # instructions, env context, prompt, reasoning, call, output, patch, its output, web
    # search, answer, compaction, next prompt, call, output
    assert roles == [
        "system", "user", "user", "assistant", "assistant", "tool", "assistant", "tool",
        "assistant", "assistant", "system", "user", "assistant", "tool",
    ]  # fmt: skip
    assert _messages()[2].content == "Fix the test."
    # The event_msg repeats of the prompt, the reasoning and the answer are not stored.
    assert Message.objects.filter(content="Fixed.").count() == 1
    assert report.notes["skipped_records"] == {
        "event_msg:agent_reasoning": 1,
        "event_msg:user_message (repeat)": 1,
        "event_msg:agent_message (repeat)": 1,
        "future_record_type": 1,
    }


def test_every_tool_call_is_paired_with_its_output_whatever_its_name(user, report):
    calls = {p.tool_call_id: p for p in _tool_parts() if p.tool_input is not None}
    outputs = {p.tool_call_id: p for p in _tool_parts() if p.tool_output is not None}
    assert set(calls) == {"call_1", "call_2", "call_3", "web_search:12"}
    assert {calls[c].tool_name for c in ("call_1", "call_2", "call_3")} == {
        "shell_command",
        "apply_patch",
        "exec",
    }
    assert calls["call_1"].tool_input == {"command": "pytest -q"}
    assert calls["call_1"].metadata["tool_kind"] == "shell"
    assert calls["call_3"].metadata["tool_kind"] == "shell"
    assert calls["call_3"].tool_input == {"arguments": "{not json"}  # kept as written
    assert calls["call_2"].tool_input["input"].startswith("*** Begin Patch")
    assert outputs["call_1"].tool_output == "1 failed"
    assert outputs["call_2"].tool_output == "Success."  # a list output's text
    assert outputs["call_2"].tool_name == "apply_patch"
    assert set(outputs) == {"call_1", "call_2", "call_3"}
    search = calls["web_search:12"]
    assert search.tool_input == {"query": "pytest"}
    assert search.tool_status == "completed"


def test_injected_context_is_synthetic_and_usage_is_kept(user, report):
    messages = _messages()
    env = MessagePart.objects.get(message=messages[1])
    assert env.is_synthetic is True
    instructions = MessagePart.objects.get(message=messages[0])
    assert (instructions.is_synthetic, instructions.text_content) == (True, "Follow AGENTS.md.")
    prompt = MessagePart.objects.get(message=messages[2])
    assert not prompt.is_synthetic
    reasoning = MessagePart.objects.get(message=messages[3])
    assert (reasoning.part_type, reasoning.text_content) == ("reasoning", "**Looking at tests**")
    assert reasoning.metadata["encrypted_content"] == "gAAA"
    searched = MessagePart.objects.get(message=messages[8])
    assert searched.metadata["usage"] == {"input_tokens": 300, "output_tokens": 30}
    row = ConversationOrigin.objects.get(conversation__session_id=SESSION)
    assert (row.agent, row.agent_version, row.cwd, row.git_branch, row.model) == (
        "codex",
        "0.60.0",
        "/work/api",
        "main",
        "gpt-5.1-codex",
    )
    facts = ImportedConversation.objects.get(conversation__session_id=SESSION).metadata
    assert facts["token_usage"] == {"input_tokens": 900, "output_tokens": 90}
    assert facts["turn_contexts"][0]["approval_policy"] == "never"
    assert facts["session_meta"]["originator"] == "codex_cli_rs"


def test_codex_compaction_is_linked_to_what_it_replaced(user, report):
    summary = Summary.objects.get(conversation__session_id=SESSION)
    assert summary.model == "codex (agent compaction)"
    assert summary.content == "The user asked to fix a test; it was fixed with a patch."
    assert ImportedSummary.objects.get(summary=summary).source["author"] == "codex"
    expanded = expand_for_user(user=user, summary_id=summary.pk, include_messages=True)
    assert [m["seq"] for m in expanded.messages] == list(range(1, 11))
    marker = MessagePart.objects.get(
        message__conversation__session_id=SESSION, part_type="compaction"
    )
    assert marker.metadata["replacement_history"][0]["role"] == "user"


def test_a_bad_line_is_reported_and_a_grown_or_compressed_rollout_adds_only_the_new(user, tmp_path):
    records = codex_rollout()
    path = tmp_path / "rollout-x.jsonl"
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in records[:5]) + "not json\n" + '["no payload"]\n'
    )
    first = import_file(format="codex", path=path, owner=user)
    assert [e["line"] for e in first.errors] == [6, 7]
    text = "".join(json.dumps(r) + "\n" for r in records[:5]) + "not json\n" + '["x"]\n'
    text += "".join(json.dumps(r) + "\n" for r in records[5:])
    packed = tmp_path / "rollout-x.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(text.encode()))
    second = import_file(format="codex", path=packed, owner=user, session_id=SESSION)
    third = import_file(format="codex", path=packed, owner=user, session_id=SESSION)
    assert third.totals()["messages"] == 0
    stored = Message.objects.filter(conversation__session_id=SESSION)
    assert first.totals()["messages"] + second.totals()["messages"] == stored.count() == 14


def test_a_forked_or_spawned_rollout_names_its_parent_session(user, tmp_path):
    def meta(**more):
        return {"timestamp": "2026-05-02T09:00:00Z", "type": "session_meta", "payload": more}

    prompt = codex_rollout()[3]
    fork = write_jsonl(tmp_path / "a.jsonl", [meta(id="child-1", forked_from_id="p-1"), prompt])
    spawn = {"subagent": {"thread_spawn": {"parent_thread_id": "p-2", "depth": 1}}}
    sub = write_jsonl(tmp_path / "b.jsonl", [meta(session_id="child-2", source=spawn), prompt])
    import_file(format="codex", path=fork, owner=user)
    import_file(format="codex", path=sub, owner=user)
    rows = {
        r.conversation.session_id: r.metadata
        for r in ImportedConversation.objects.filter(conversation__origin__agent="codex")
    }
    assert (rows["child-1"]["line"], rows["child-1"]["parent_session"]) == ("fork", "p-1")
    assert (rows["child-2"]["line"], rows["child-2"]["parent_session"]) == ("subagent", "p-2")
