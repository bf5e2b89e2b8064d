"""The repair replayed on what the real Claude Code 2.1.197 sent and wrote, recorded by
`scripts/agent_repair_acceptance.py --record tests/mcpserver/recordings` (sanitized): its
hook inputs in the order it ran them around a `/compact` (PreCompact, SessionStart
`compact`, PostCompact with `compact_summary`, then UserPromptSubmit) and its transcript,
which it writes with the compaction only after those hooks."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from conversations.models import Summary
from importers.models import AgentCompactionRepair

RECORDINGS = Path(__file__).parent / "recordings"
PREFIX = "claude-code-2.1.197-"


def recorded(name: str) -> dict:
    return json.loads((RECORDINGS / f"{PREFIX}{name}.json").read_text())


def transcript_lines() -> list[str]:
    return (RECORDINGS / f"{PREFIX}compacted-session.jsonl").read_text().splitlines()


def hook(monkeypatch, event: str, hook_input: dict, user) -> tuple[str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(hook_input)))
    out, err = io.StringIO(), io.StringIO()
    call_command("lcm_hook", event, "--user", user.username, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_the_real_claude_code_order_hands_the_repair_back_with_the_next_prompt(
    monkeypatch, tmp_path, user
):
    lines = transcript_lines()
    boundary = next(n for n, line in enumerate(lines) if '"compact_boundary"' in line)
    transcript = tmp_path / "session.jsonl"
    transcript.write_text("\n".join(lines[:boundary]) + "\n")  # as the hooks find it

    def given(name: str) -> dict:
        return {**recorded(name), "transcript_path": str(transcript)}

    hook(monkeypatch, "pre-compact", given("PreCompact-manual"), user)
    out, _ = hook(monkeypatch, "session-start", given("SessionStart-compact"), user)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "left out" not in context  # Claude Code has not said its summary yet
    out, err = hook(monkeypatch, "post-compact", given("PostCompact-manual"), user)
    assert "tokens to hand back" in err

    summary = Summary.objects.get(model__endswith="(agent compaction)")
    assert summary.content.startswith("1. Primary Request")  # the summary, tags removed
    transcript.write_text("\n".join(lines) + "\n")  # Claude Code writes its compaction
    out, _ = hook(monkeypatch, "user-prompt-submit", given("UserPromptSubmit"), user)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    repair = AgentCompactionRepair.objects.get(summary=summary)
    assert context == repair.text and f"summary_id={summary.pk}" in context
    assert "check_cache.py" in context and "cache.py" in context and "300" in context
    assert repair.measured["after"]["score"] > repair.measured["before"]["score"]
    assert [d["event"] for d in repair.deliveries] == ["UserPromptSubmit"]

    call_command("lcm_import", "claude-code", str(transcript), "--user", user.username,
                 stdout=io.StringIO())  # fmt: skip
    assert Summary.objects.filter(model__endswith="(agent compaction)").count() == 1
