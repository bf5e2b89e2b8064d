"""Agent sessions as people know them in the explorer: an imported Claude Code session with a
sub-agent and its own compaction, and a Codex rollout. The list names agent, version,
project, title and time span, nests the sub-agent under its session, filters by agent and
project; the session's page marks the agent compaction on the timeline and shows what its
summary kept, dropped and what was handed back; terminal escape codes are not shown."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from conversations.models import Summary
from importers.repair import agent_compaction_repair
from tests.explorer.helpers import client_for
from tests.importers.agent_sessions import (
    SESSION,
    assistant,
    claude_code_2x,
    codex_rollout,
    subagent,
    write_jsonl,
)

COLOURED = "\x1b[32m✓ hook ok\x1b[0m \x1b]0;title\x07done"


def imported(tmp_path, user) -> None:
    records = claude_code_2x()
    records.insert(-2, assistant("r20", "r19", [{"type": "text", "text": COLOURED}], 6))
    session = write_jsonl(tmp_path / "claude" / f"{SESSION}.jsonl", records)
    write_jsonl(tmp_path / "claude" / SESSION / "subagents" / "agent-abc123.jsonl",
                subagent("abc123"))  # fmt: skip
    rollout = write_jsonl(tmp_path / "codex" / "rollout-2026-05-02T09-00-00-x.jsonl",
                          codex_rollout())  # fmt: skip
    for fmt, path in (("claude-code", session), ("codex", rollout)):
        call_command("lcm_import", fmt, str(path), "--user", user.username, stdout=io.StringIO())


def rows_of(body: str) -> list[str]:
    return re.findall(r"<tr data-conversation=.*?</tr>", body, re.S)


@pytest.mark.django_db
def test_the_list_shows_agent_sessions_with_sub_agents_under_them_and_filters(tmp_path, user):
    imported(tmp_path, user)
    client = client_for(user)
    rows = rows_of(client.get("/").content.decode())
    # the Claude Code session with its sub-agent and its edited-prompt branch under it, and
    # the Codex one
    assert len(rows) == 4
    claude = next(n for n, row in enumerate(rows) if "Cleaning up files" in row)
    row = rows[claude]
    assert "claude-code" in row and "2.1.114" in row and "/work/app" in row
    assert SESSION in row and "1 agent compaction" in row
    assert re.search(r"<time [^>]*>2026-05-01 10:00</time> – <time", row)
    children = rows[claude + 1 : claude + 3]
    assert all('class="subagent"' in c and f'data-parent="{SESSION}"' in c for c in children)
    assert any("Find the logs." in c and ">subagent" in c for c in children)  # its first prompt
    assert any(">branch" in c for c in children)
    codex = next(row for row in rows if "codex" in row)
    assert "/work/api" in codex and "0.60.0" in codex

    only_codex = rows_of(client.get("/", {"agent": "codex"}).content.decode())
    assert len(only_codex) == 1 and "/work/api" in only_codex[0]
    in_app = rows_of(client.get("/", {"project": "/work/app"}).content.decode())
    assert len(in_app) == 3 and "Cleaning up files" in in_app[0]  # the session, under it two
    assert rows_of(client.get("/", {"project": "/work/ap"}).content.decode()) == []


@pytest.mark.django_db
def test_the_session_page_shows_what_the_agents_compaction_kept_dropped_and_handed_back(
    tmp_path, user
):
    imported(tmp_path, user)
    summary = Summary.objects.get(
        model__endswith="(agent compaction)", conversation__session_id=SESSION
    )
    conversation = summary.conversation
    client = client_for(user)
    body = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert f'id="compaction-{summary.pk}"' in body and "Kept by its summary" in body
    assert "Dropped" in body and "no repair drawn" in body
    assert 'class="compaction-mark"' in body  # on the timeline, after the last replaced message
    assert "\x1b" not in body and "\x07" not in body
    assert "✓ hook ok done" in body

    repair = agent_compaction_repair(summary=summary)
    body = client.get(f"/conversations/{conversation.pk}/").content.decode()
    assert "Handed back" in body and "not delivered yet" in body
    if repair.text:
        first_line = repair.text.splitlines()[1].replace('"', "&quot;")
        assert first_line.split(" (msg:")[0][:40] in body


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_a_browser_agent_sessions_filter_and_lead_to_what_was_handed_back(
    page, user, live_server, tmp_path
):
    from playwright.sync_api import expect

    imported(tmp_path, user)
    summary = Summary.objects.get(
        model__endswith="(agent compaction)", conversation__session_id=SESSION
    )
    repair = agent_compaction_repair(summary=summary)
    client = client_for(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.goto("/")
    rows = page.locator("#conversations tbody tr")
    expect(rows).to_have_count(4)
    session_row = page.locator("tr", has_text="Cleaning up files")
    expect(session_row.locator("td.agent")).to_contain_text("claude-code 2.1.114")
    expect(session_row.locator("td.project")).to_have_text("/work/app")
    # the sub-agent and the branch come right after their session, marked as nested
    nested = page.locator(f'tr.subagent[data-parent="{SESSION}"]')
    expect(nested).to_have_count(2)
    order = page.evaluate(
        "() => [...document.querySelectorAll('#conversations tbody tr')]"
        ".map(r => r.classList.contains('subagent') ? 'child' : 'top')"
    )
    at = next(n for n, row in enumerate(rows.all_inner_texts()) if "Cleaning up files" in row)
    assert order[at + 1 : at + 3] == ["child", "child"]

    page.select_option("#agent", "codex")
    page.click("form.search button")
    expect(rows).to_have_count(1)
    expect(rows.first.locator("td.project")).to_have_text("/work/api")
    page.select_option("#agent", "")
    page.fill("#project", "/work/app")
    page.click("form.search button")
    expect(rows).to_have_count(3)

    page.click("a.conv-title >> text=Cleaning up files")
    mark = page.locator(".compaction-mark").first
    expect(mark).to_contain_text("agent compaction")
    mark.locator("a").click()
    section = page.locator(f"#compaction-{summary.pk}")
    expect(section.locator(".ac-kept")).to_contain_text("Kept by its summary")
    expect(section.locator(".ac-handed-back")).to_contain_text("not delivered yet")
    if repair.text:
        expect(section.locator("pre.repair-text")).to_contain_text("[lcm] Your compaction")
    assert "\x1b" not in page.inner_text("body")
    expect(page.locator("#timeline")).to_contain_text("✓ hook ok done")
    assert page.console_errors == []
