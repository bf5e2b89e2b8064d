"""grep across agents and projects: the importers record each session's origin, grep
filters on agent, project directory (whole path components) and time, names every hit's
origin, and never reaches another user's sessions."""

from __future__ import annotations

import datetime as dt

import pytest

from conversations.models import Conversation, ConversationOrigin
from importers.services import import_file
from retrieval.grep import GrepRequest, grep_for_user
from retrieval.tools import tool_call_for_user
from tests.factories import ConversationFactory, append_messages
from tests.importers.agent_sessions import claude_code_2x, codex_rollout, write_jsonl

pytestmark = pytest.mark.django_db

FACT = "squashed migration 0007 fixed the lockfile error"


def codex_session(tmp_path, *, session: str, cwd: str, text: str, day: str = "2026-05-02"):
    """A Codex rollout in the real shape whose user prompt is `text`, run in `cwd` on `day`."""
    records = codex_rollout()
    for record in records:
        record["timestamp"] = record["timestamp"].replace("2026-05-02", day)
    records[0]["payload"].update(id=session, cwd=cwd, timestamp=f"{day}T09:00:00.000Z")
    records[2]["payload"]["cwd"] = cwd  # turn_context
    records[3]["payload"]["content"][0]["text"] = text
    return write_jsonl(tmp_path / f"rollout-{day}T09-00-00-{session}.jsonl", records)


@pytest.fixture
def sessions(tmp_path, user, other_user):
    """The user's Codex sessions in /work/api (May) and /work/api2 (June) and a Claude Code
    session in /work/app; the other user's Codex session in /work/api. All hold FACT's
    words except the Claude Code one."""
    made = {}
    for owner, key, cwd, day in (
        (user, "api", "/work/api", "2026-05-02"),
        (user, "api2", "/work/api2", "2026-06-10"),
        (other_user, "theirs", "/work/api", "2026-05-03"),
    ):
        session = f"019b0000-aaaa-7000-8000-{abs(hash(key)) % 10**12:012d}"
        path = codex_session(tmp_path / key, session=session, cwd=cwd, text=FACT, day=day)
        import_file(format="codex", path=path, owner=owner)
        made[key] = Conversation.objects.get(owner=owner, session_id=session)
    import_file(format="claude-code", path=write_jsonl(tmp_path / "cc.jsonl", claude_code_2x()),
                owner=user)  # fmt: skip
    made["claude"] = Conversation.objects.filter(owner=user, origin__agent="claude-code").first()
    return made


def _grep(user, **kwargs) -> list[dict]:
    return grep_for_user(user=user, request=GrepRequest(query="lockfile", **kwargs))


def test_the_importers_record_where_each_session_comes_from(sessions):
    origin = ConversationOrigin.objects.get(conversation=sessions["api"])
    assert (origin.agent, origin.cwd, origin.git_branch) == ("codex", "/work/api", "main")
    assert origin.agent_version == "0.60.0" and origin.model == "gpt-5.1-codex"
    assert origin.started_at == dt.datetime(2026, 5, 2, 9, tzinfo=dt.UTC)
    claude = ConversationOrigin.objects.get(conversation=sessions["claude"])
    assert (claude.agent, claude.cwd, claude.git_branch) == (
        "claude-code",
        "/work/app",
        "feature/x",
    )


def test_grep_searches_every_session_of_the_user_and_names_each_hits_origin(user, sessions):
    hits = _grep(user)
    assert {h["conversation_id"] for h in hits} == {sessions["api"].pk, sessions["api2"].pk}
    hit = next(h for h in hits if h["conversation_id"] == sessions["api"].pk)
    assert hit["origin"]["agent"] == "codex"
    assert hit["origin"]["project"] == "/work/api"
    assert hit["origin"]["session_id"] == sessions["api"].session_id
    assert hit["origin"]["started_at"] == dt.datetime(2026, 5, 2, 9, tzinfo=dt.UTC)
    assert hit["created_at"].date() == dt.date(2026, 5, 2)


def test_a_conversation_no_agent_wrote_has_no_origin_and_no_agent_filter_finds_it(user, sessions):
    conversation = ConversationFactory(owner=user)
    append_messages(
        conversation, 1, payload=lambda i: {"role": "user", "content": "lockfile by the API"}
    )
    hits = {h["conversation_id"]: h for h in _grep(user)}
    assert hits[conversation.pk]["origin"] is None
    assert hits[sessions["api"].pk]["origin"]["agent"] == "codex"
    assert conversation.pk not in {h["conversation_id"] for h in _grep(user, project="/")}


def test_project_matches_whole_path_components(user, sessions):
    assert {h["conversation_id"] for h in _grep(user, project="/work/api")} == {sessions["api"].pk}
    assert {h["conversation_id"] for h in _grep(user, project="/work/api/")} == {sessions["api"].pk}
    assert {h["conversation_id"] for h in _grep(user, project="/work")} == {
        sessions["api"].pk,
        sessions["api2"].pk,
    }
    assert _grep(user, project="/work/ap") == []
    assert _grep(user, project="/WORK/API") == []  # a path is case-sensitive


def test_agent_and_time_narrow_it(user, sessions):
    assert _grep(user, agent="claude-code") == []
    assert {h["conversation_id"] for h in _grep(user, agent="codex")} == {
        sessions["api"].pk,
        sessions["api2"].pk,
    }
    june = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    assert {h["conversation_id"] for h in _grep(user, agent="codex", since=june)} == {
        sessions["api2"].pk
    }
    assert {h["conversation_id"] for h in _grep(user, before=june)} == {sessions["api"].pk}
    # claude-code's session is found by its own words, with its own origin.
    hits = grep_for_user(
        user=user, request=GrepRequest(query="ls", mode="regex", agent="claude-code", limit=5)
    )
    assert hits and {h["origin"]["agent"] for h in hits} == {"claude-code"}


def test_another_users_sessions_are_never_searched(user, other_user, sessions):
    for kwargs in ({}, {"agent": "codex"}, {"project": "/work/api"}, {"project": "/"}):
        assert sessions["theirs"].pk not in {h["conversation_id"] for h in _grep(user, **kwargs)}
    theirs = _grep(other_user, project="/work/api")
    assert {h["conversation_id"] for h in theirs} == {sessions["theirs"].pk}
    # One conversation named outright is still checked against the filters.
    assert _grep(user, conversation_id=sessions["api"].pk, project="/work/api2") == []


def test_the_grep_api_takes_the_filters_and_refuses_bad_ones(api, sessions):
    response = api.post(
        "/api/v1/grep/", {"query": "lockfile", "agent": "codex", "project": "/work/api2"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 200
    results = response.json()["results"]
    assert [r["conversation_id"] for r in results] == [sessions["api2"].pk]
    assert results[0]["origin"]["project"] == "/work/api2"
    bad = api.post("/api/v1/grep/", {"query": "x", "agent": "a" * 33}, format="json")
    assert bad.status_code == 400 and "agent" in bad.json()["extra"]["fields"]


def test_the_model_tool_with_an_agent_searches_every_conversation(user, sessions):
    result = tool_call_for_user(
        user=user,
        name="lcm_grep",
        input={"query": "lockfile", "agent": "codex", "project": "/work/api"},
        conversation_id=sessions["claude"].pk,
    )
    assert not result.is_error
    assert f'"conversation_id": {sessions["api"].pk}' in result.text
    bad = tool_call_for_user(
        user=user, name="lcm_grep", input={"query": "x", "project": 3}, conversation_id=1
    )
    assert bad.is_error


@pytest.mark.parametrize("mode", ["full_text", "hybrid", "semantic"])
def test_a_long_list_of_sessions_is_searched_wide_and_filtered(user, sessions, monkeypatch, mode):
    from memory.indexing import index_conversation_messages
    from retrieval import grep_origin
    from retrieval.grep import MAX_LIMIT

    assert grep_origin.OVERFETCH == MAX_LIMIT
    for conversation in sessions.values():
        index_conversation_messages(conversation_id=conversation.pk)
    narrow = {h["conversation_id"] for h in _grep(user, mode=mode, project="/work/api")}
    monkeypatch.setattr(grep_origin, "MAX_LISTED_FOR_MEANING", 0)
    monkeypatch.setattr(grep_origin, "MAX_LISTED", 0)
    wide = {h["conversation_id"] for h in _grep(user, mode=mode, project="/work/api")}
    assert wide == narrow == {sessions["api"].pk}
