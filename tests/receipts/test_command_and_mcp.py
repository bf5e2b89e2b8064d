"""`manage.py lcm_receipts` and the `lcm_receipt` MCP tool over the same receipts."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from mcpserver.tools import mcp_tools
from tests.receipts.calls import offline_calls

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(user, offline_engine, small_chunks):
    small_chunks.LCM_FRESH_TAIL_COUNT = 2
    small_chunks.LCM_LEAF_MIN_FANOUT = 2
    return offline_calls(user)


def _run(*args) -> str:
    out = io.StringIO()
    call_command("lcm_receipts", *args, stdout=out)
    return out.getvalue()


def test_the_command_lists_shows_replays_and_diffs(calls, capfdbinary):
    conversation_id, receipts = calls
    listed = json.loads(_run("list", "--conversation", str(conversation_id), "--json"))
    assert [r["id"] for r in listed] == [r.id for r in receipts]
    shown = _run("show", receipts[-1].id)
    assert "summary standing for older messages" in shown and f"receipt {receipts[-1].id}" in shown
    replayed = json.loads(_run("replay", receipts[0].id, "--json"))
    assert replayed["exact"] is True and replayed["body"]["model"] == "offline"
    diff = _run("diff", receipts[3].id)
    assert "summarized by sum_" in diff and "cached prefix changed at byte" in diff
    with pytest.raises(CommandError, match="first call"):
        _run("diff", receipts[0].id)
    with pytest.raises(CommandError, match="not found"):
        _run("show", "01ARZ3NDEKTSV4RRFFQ69G5FAV")


def test_the_mcp_tool_answers_only_within_the_users_conversations(calls, user, other_user):
    conversation_id, receipts = calls
    tool = mcp_tools()["lcm_receipt"]
    listed = json.loads(
        tool.run(user=user, arguments={"action": "list", "conversation_id": conversation_id}).text
    )
    assert [r["id"] for r in listed] == [r.id for r in receipts]
    diff = json.loads(
        tool.run(user=user, arguments={"action": "diff", "receipt_id": receipts[3].id}).text
    )
    assert diff["summarized"] and diff["cache"]["changed"]
    refused = tool.run(user=other_user, arguments={"action": "show", "receipt_id": receipts[0].id})
    assert refused.is_error and "not found" in refused.text
    bad = tool.run(user=user, arguments={"action": "explode"})
    assert bad.is_error
