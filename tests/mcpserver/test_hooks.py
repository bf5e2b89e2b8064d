"""`manage.py lcm_hook`: Claude Code's hook JSON in and out. SessionStart answers
`hookSpecificOutput.additionalContext` (the note, the user's own pins within the cap);
PreCompact catches the transcript up through the idempotent importer, locally or through
a server's import API; nothing ever fails the agent."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from conversations.models import Message
from tests.importers.agent_sessions import SESSION, cc, claude_code_2x, write_jsonl
from tests.support.tokens import issue_token
from turns.branches import pin_add
from turns.services import session_create


def hook(monkeypatch, event: str, hook_input, *args) -> tuple[str, str]:
    stdin = hook_input if isinstance(hook_input, str) else json.dumps(hook_input)
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out, err = io.StringIO(), io.StringIO()
    call_command("lcm_hook", event, *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def start_input() -> dict:
    return {
        "session_id": SESSION,
        "transcript_path": "/nowhere.jsonl",
        "cwd": "/work/app",
        "hook_event_name": "SessionStart",
        "source": "startup",
    }


def _pin(owner, *texts):
    session = session_create(owner=owner, title="chat")
    for text in texts:
        pin_add(branch=session.active_branch, text=text)


@pytest.mark.django_db
def test_session_start_says_where_memory_is_with_the_users_pins_within_the_cap(
    monkeypatch, user, other_user
):
    _pin(user, "Deploys go through make release.", "The staging DB is pg-2. " * 60)
    _pin(other_user, "Their secret fact.")
    out, err = hook(monkeypatch, "session-start", start_input(), "--user", user.username)
    output = json.loads(out)
    assert output["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = output["hookSpecificOutput"]["additionalContext"]
    assert "lcm_grep" in context and "`lcm`" in context
    assert "- Deploys go through make release." in context
    assert "pg-2" not in context and "(1 more pinned facts" in context  # over the cap
    assert "Their secret fact." not in context
    assert err == ""

    out, _ = hook(monkeypatch, "session-start", "", "--user", user.username,
                  "--pins-token-cap", "0")  # fmt: skip
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "Pinned facts" not in context and "lcm_grep" in context


@pytest.mark.django_db
def test_pre_compact_catches_the_transcript_up_adding_only_what_is_new(monkeypatch, tmp_path, user):
    records = claude_code_2x()
    transcript = write_jsonl(tmp_path / f"{SESSION}.jsonl", records)
    compact = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": "/work/app",
        "hook_event_name": "PreCompact",
        "trigger": "auto",
        "custom_instructions": "",
    }
    out, err = hook(monkeypatch, "pre-compact", compact, "--user", user.username)
    assert out == "" and "new messages stored" in err
    stored = Message.objects.filter(conversation__owner=user).count()
    assert stored > 0

    hook(monkeypatch, "pre-compact", compact, "--user", user.username)
    assert Message.objects.filter(conversation__owner=user).count() == stored

    write_jsonl(transcript, [*records, cc("u20", "r19", "user", "One more thing: the docs.")])
    hook(monkeypatch, "pre-compact", compact, "--user", user.username)
    assert Message.objects.filter(conversation__owner=user).count() == stored + 1
    assert Message.objects.filter(content__contains="One more thing: the docs.").count() == 1


@pytest.mark.django_db
def test_a_hook_never_fails_the_agent(monkeypatch, user):
    for hook_input in ("", "not json", [1, 2], {"transcript_path": "/no/such/file.jsonl"}):
        out, err = hook(monkeypatch, "pre-compact", hook_input, "--user", user.username)
        assert out == "" and "transcript_path" in err
    out, err = hook(monkeypatch, "session-start", start_input(), "--user", "nobody")
    assert "lcm_grep" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "no active user" in err


@pytest.mark.django_db(transaction=True)
def test_session_start_through_a_servers_http_api(monkeypatch, live_server, user):
    _pin(user, "Remote pinned fact.")
    key = issue_token(user)
    remote = ("--server", live_server.url, "--token", key)
    out, err = hook(monkeypatch, "session-start", start_input(), *remote)
    assert "- Remote pinned fact." in json.loads(out)["hookSpecificOutput"]["additionalContext"]

    out, err = hook(monkeypatch, "session-start", start_input(), "--server", live_server.url,
                    "--token", "lcm_wrong")  # fmt: skip
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "unavailable right now (HTTP 401)" in context and "Remote pinned fact" not in context


@pytest.mark.django_db
def test_the_session_start_api_answers_the_hook_json_and_refuses_bad_input(api, anon_api, user):
    _pin(user, "Pinned through the API.")
    url = "/api/v1/hooks/session-start/"
    answer = api.post(url, {"hook_input": start_input(), "pins_token_cap": 50}, format="json")
    assert answer.status_code == 200, answer.content
    output = answer.json()["hookSpecificOutput"]
    assert output["hookEventName"] == "SessionStart"
    assert "- Pinned through the API." in output["additionalContext"]
    for body in ({"pins_token_cap": -1}, {"server_name": "a b"}, {"surprise": 1},
                 {"hook_input": [1]}):  # fmt: skip
        refused = api.post(url, body, format="json")
        assert refused.status_code == 400, (body, refused.content)
        assert refused.json()["code"] == "invalid"
    assert anon_api.post(url, {}, format="json").status_code == 401
