"""`lcm_eval fidelity` on a small Claude Code session with one agent compaction, written by
the test in the real format (benchmarks/synthetic.py): every method is measured on the span
the agent's compaction replaced, beside the agent's own summary."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from benchmarks.synthetic import claude_code_session
from compaction.models import SummaryFidelity


@pytest.mark.django_db
def test_lcm_eval_fidelity_measures_each_method_beside_the_agent_summary(tmp_path, capsys):
    path = tmp_path / "session.jsonl"
    records = claude_code_session(rounds=24, session_id="fidelity-eval", compactions=1)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "figures.json"

    call_command("lcm_eval", "fidelity", str(path), "--size", "300", "--json", str(out))

    cells = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert "| file | span | size | method |" in printed
    assert "per 1,000 source tokens" in printed
    methods = {(c["span"], c["method"], c["size"]) for c in cells}
    assert ("compaction 1", "lcm summary", 300) in methods
    assert ("compaction 1", "lcm summary", 600) in methods
    assert ("compaction 1", "newest records", 300) in methods
    assert ("compaction 1", "lcm compacted", 300) in methods
    assert any(c["method"] == "agent summary" for c in cells)
    summary = next(c for c in cells if c["method"] == "lcm summary" and c["size"] == 300)
    newest = next(c for c in cells if c["method"] == "newest records" and c["size"] == 300)
    assert summary["tokens"] <= 300 and newest["tokens"] <= 300
    assert summary["score"] >= newest["score"]
    assert sum(total for _, total in summary["kept"].values()) > 0
    agent = SummaryFidelity.objects.get(summary__model__endswith="(agent compaction)")
    assert agent.path == "agent"  # the import measured the agent's own summary like ours
    cell = next(c for c in cells if c["method"] == "agent summary")
    assert agent.score == cell["score"]


@pytest.mark.django_db
def test_lcm_eval_fidelity_repair_measures_the_agent_summary_alone_and_with_the_addendum(
    tmp_path, capsys
):
    path = tmp_path / "session.jsonl"
    records = claude_code_session(rounds=24, session_id="repair-eval", compactions=1)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "figures.json"

    call_command("lcm_eval", "fidelity", "--repair", str(path), "--budget", "400",
                 "--json", str(out))  # fmt: skip

    rows = {row["method"]: row for row in json.loads(out.read_text())}
    assert set(rows) == {"agent summary", "agent + addendum", "lcm compacted", "lcm summary"}
    alone, repaired = rows["agent summary"], rows["agent + addendum"]
    assert not alone["stand_in"]  # the file holds the agent's own summary
    assert 0 < repaired["addendum_tokens"] <= 400
    assert repaired["score"] >= alone["score"]
    assert repaired["relations"]["score"] >= alone["relations"]["score"]
    assert repaired["tokens"] == alone["tokens"] + repaired["addendum_tokens"] or (
        abs(repaired["tokens"] - alone["tokens"] - repaired["addendum_tokens"]) <= 2
    )
    printed = capsys.readouterr().out
    assert "pooled over every span (addendum budget 400 tokens)" in printed
    assert "still missed by agent + addendum, by kind:" in printed
