"""Long commands report progress on stderr, and `--json` keeps stdout pure JSON with no
progress at all."""

from __future__ import annotations

import io
import json
import re

from django.core.management import call_command

from explorer.demo import DEMO_SESSION
from integrity.checks import CHECKS
from tests.factories import append_messages


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_integrity_scan_prints_a_progress_line_when_not_a_terminal(conversation):
    append_messages(conversation, 3)
    out, err = run("lcm_integrity")
    n = len(CHECKS)
    assert re.fullmatch(rf"Integrity checks: {n}/{n} \(100%\) \d+\.\ds - finished\n", err), err
    assert out.startswith("Integrity report ")


def test_integrity_scan_json_is_pure_json_without_progress(conversation):
    append_messages(conversation, 3)
    out, err = run("lcm_integrity", "--json")
    assert err == ""
    report = json.loads(out)
    assert report["total_problems"] == 0
    assert len(report["checks"]) == len(CHECKS)


def test_demo_loader_reports_progress_and_its_json_is_machine_readable(db):
    out, err = run("lcm_demo", "--json")
    assert err == ""
    result = json.loads(out)
    assert result["created"] is True
    assert result["session_id"] == DEMO_SESSION
    assert result["message_count"] == 301
    assert result["username"] == "demo" and len(result["password"]) == 16

    out, err = run("lcm_demo")
    assert re.fullmatch(r"Loading demo: 301/301 \(100%\) \d+\.\ds - finished\n", err), err
    assert "password:" in out


def test_bench_json_is_pure_json_and_text_mode_shows_progress(db):
    out, err = run("lcm_bench", "--only", "integrity", "--scale", "0.01", "--json")
    assert err == ""
    result = json.loads(out)
    assert set(result) == {"machine", "rows", "notes"}
    assert result["rows"] and set(result["rows"][0]) == {
        "name",
        "figure",
        "unit",
        "target",
        "detail",
    }
    out, err = run("lcm_bench", "--only", "integrity", "--scale", "0.01")
    assert err.splitlines()[0] == "running integrity ..."
    assert re.fullmatch(
        r"Benchmark integrity: 1/1 \(100%\) \d+\.\ds - finished", err.splitlines()[-1]
    )
    assert out.startswith("Machine: ")
