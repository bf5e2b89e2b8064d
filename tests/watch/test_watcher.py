"""The watcher in-process, pass by pass (what polling does): a Claude Code session written
line by line with half-written lines, a truncation, lost offsets and restarts, finds every
message exactly once; sub-agent files, Codex compression to .zst, Gemini rewrites."""

from __future__ import annotations

import json

import pytest
import zstandard

from conversations.models import Conversation, Message
from importers.models import WatchedFile
from tests.importers.agent_sessions import (
    SESSION,
    assistant,
    cc,
    codex_fork,
    codex_rollout,
    gemini_chat,
    subagent,
    tool_result,
    tool_use,
    write_jsonl,
)

pytestmark = pytest.mark.django_db


def linear_session(turns: int) -> list[dict]:
    """Claude Code 2.x records of `turns` prompts, each answered with a tool call, its
    result, an attachment in the chain and a closing text; 4 messages per turn."""
    records, parent, n = [], None, 0

    def uuid(kind: str) -> str:
        nonlocal n
        n += 1
        return f"{kind}{n:03d}"

    for turn in range(turns):
        prompt = uuid("u")
        records.append(cc(prompt, parent, "user", f"Prompt number {turn}: count the files."))
        call = uuid("r")
        records.append(assistant(call, prompt, [tool_use(f"toolu_{turn}")], turn))
        result = uuid("u")
        records.append(cc(result, call, "user", [tool_result(f"toolu_{turn}", f"{turn} files")]))
        attachment = uuid("a")
        records.append(cc(attachment, result, "attachment", attachment={"type": "diagnostics"}))
        answer = uuid("r")
        text = [{"type": "text", "text": f"Answer number {turn}."}]
        records.append(assistant(answer, attachment, text, 100 + turn))
        parent = answer
    return records


def _messages(session: str = SESSION) -> list[str]:
    return list(
        Message.objects.filter(conversation__session_id=session)
        .order_by("seq")
        .values_list("external_id", flat=True)
    )


def test_a_session_written_line_by_line_is_captured_exactly_once(stores, new_watcher):
    records = linear_session(6)
    path = stores[0].root / "-work-app" / f"{SESSION}.jsonl"
    path.parent.mkdir()
    lines = [json.dumps(r) + "\n" for r in records]
    watcher = new_watcher()
    written = ""
    for index, line in enumerate(lines):
        half = len(line) // 2
        path.write_text(written + line[:half])  # the agent is mid-write
        watcher.run_pass()
        written += line
        path.write_text(written)
        watcher.run_pass()
        if index == 12:
            watcher = new_watcher()  # a restart: offsets come back from the database
        if index == 18:
            WatchedFile.objects.all().delete()  # a crash after the import, before its offset
            watcher = new_watcher()
    expected = [f"claude-code:{r['uuid']}" for r in records if r["type"] != "attachment"]
    assert _messages() == expected
    row = WatchedFile.objects.get(path=str(path))
    assert (row.offset, row.lines) == (len(written.encode()), len(lines))

    # Truncated, then written again with more: the file is read from the start.
    more = linear_session(8)
    path.write_text("")
    watcher.run_pass()
    path.write_text("".join(json.dumps(r) + "\n" for r in more))
    watcher.run_pass()
    assert _messages() == [f"claude-code:{r['uuid']}" for r in more if r["type"] != "attachment"]
    assert Conversation.objects.filter(session_id=SESSION).count() == 1


def test_a_sub_agent_file_is_imported_with_its_session(stores, new_watcher):
    folder = stores[0].root / "-work-app"
    agent = write_jsonl(
        folder / SESSION / "subagents" / "agent-abc123.jsonl", subagent("abc123")[:1]
    )
    watcher = new_watcher()
    watcher.run_pass()  # its session file is not there yet: nothing to import
    assert not Message.objects.exists()
    write_jsonl(folder / f"{SESSION}.jsonl", linear_session(1))
    watcher.run_pass()
    sub = f"{SESSION}:subagent:abc123"
    assert len(_messages(sub)) == 1
    write_jsonl(agent, subagent("abc123"))  # the sub-agent answers
    assert watcher.run_pass().units == 1
    assert len(_messages(sub)) == 2 and len(_messages()) == 4


def test_a_codex_rollout_compressed_to_zst_adds_nothing_and_is_followed(stores, new_watcher):
    folder = stores[1].root / "2026" / "05" / "02"
    name = "rollout-2026-05-02T09-00-00-019b0000-aaaa-7000-8000-000000000001.jsonl"
    rollout = codex_rollout()
    path = write_jsonl(folder / name, rollout[:10])
    watcher = new_watcher()
    first = watcher.run_pass().messages
    write_jsonl(path, rollout)
    second = watcher.run_pass().messages
    assert first > 0 and second > 0
    total = Message.objects.count()
    # Codex compresses the cold rollout: the .jsonl goes, the .jsonl.zst comes.
    compressed = folder / (name + ".zst")
    compressed.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
    path.unlink()
    result = watcher.run_pass()
    assert result.messages == 0 and Message.objects.count() == total
    assert WatchedFile.objects.get(path=str(path)).deleted
    assert WatchedFile.objects.get(path=str(compressed)).signature
    # ... and archived: moved to archived_sessions, still nothing new.
    archived = stores[2].root / compressed.name
    compressed.rename(archived)
    assert new_watcher().run_pass().messages == 0
    assert Message.objects.count() == total


def test_a_codex_fork_written_while_watched_holds_only_its_own_messages(stores, new_watcher):
    folder = stores[1].root / "2026" / "05" / "02"
    parent = codex_rollout()
    write_jsonl(folder / "rollout-2026-05-02T09-00-00-parent.jsonl", parent)
    fork = codex_fork(parent, fork_id="fork-1", cut=16, own=["Try another way."])
    path = write_jsonl(folder / "rollout-2026-05-02T10-00-00-fork-1.jsonl", fork[:10])
    watcher = new_watcher()
    watcher.run_pass()  # the fork caught in the middle of its replay
    write_jsonl(path, fork)
    watcher.run_pass()
    own = Message.objects.filter(conversation__session_id="fork-1").order_by("seq")
    assert [m.content for m in own] == ["Follow AGENTS.md.", "Try another way."]
    assert Message.objects.count() == 14 + 2


def test_a_gemini_file_rewritten_whole_adds_only_new_messages(stores, new_watcher):
    path = stores[4].root / "proj" / "chats" / "session-2026-05-01T10-00-abcd.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(gemini_chat()))
    watcher = new_watcher()
    before = watcher.run_pass().messages
    path.write_text("{ half written")  # read mid-save: waits, nothing stored
    assert watcher.run_pass().waiting == 1
    path.write_text(json.dumps(gemini_chat(extra_messages=3)))
    assert watcher.run_pass().messages == 3
    assert Message.objects.count() == before + 3
    assert watcher.run_pass().files == 0


def test_a_gemini_sub_agent_log_is_followed_and_linked_to_its_parent(stores, new_watcher):
    from importers.models import ImportedConversation

    parent = "11111111-2222-3333-4444-555555555555"
    path = stores[4].root / "proj" / "chats" / parent / "sub-0001.jsonl"
    header = {"sessionId": "sub-0001", "projectHash": "ab" * 32, "kind": "subagent",
              "startTime": "2026-05-03T08:00:00Z", "lastUpdated": "2026-05-03T08:00:00Z"}  # fmt: skip
    first = {"id": "s1", "timestamp": "2026-05-03T08:00:01Z", "type": "user", "content": "Look."}
    write_jsonl(path, [header, first])
    watcher = new_watcher()
    assert watcher.run_pass().messages == 1
    answer = {"id": "s2", "timestamp": "2026-05-03T08:00:02Z", "type": "gemini", "content": "Done."}
    write_jsonl(path, [header, first, answer])
    assert watcher.run_pass().messages == 1
    facts = ImportedConversation.objects.get(conversation__session_id="sub-0001")
    assert facts.metadata["line"] == "subagent"
    assert facts.metadata["parent_session"] == parent
    assert facts.metadata["project"] == "proj"
