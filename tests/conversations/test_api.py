"""The conversations API over real HTTP handling (DRF test client): ingest, reads,
pagination, and bad input, which always gets a 4xx in the one error shape and stores
nothing."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import ContextItem, Conversation, Message, MessagePart, Summary
from tests.factories import append_messages, message_payload


def _url(conversation_id, tail: str = "") -> str:
    return f"/api/v1/conversations/{conversation_id}/{tail}"


def _error(response, status: int) -> dict:
    """Assert the one error shape and return the body."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "extra"}
    assert isinstance(body["code"], str) and body["code"]
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["extra"], dict)
    return body


def _stored() -> tuple[int, int, int, int]:
    return (
        Conversation.objects.count(),
        Message.objects.count(),
        MessagePart.objects.count(),
        ContextItem.objects.count(),
    )


def _post_raw(client, url: str, body: bytes | str, content_type: str = "application/json"):
    return client.generic("POST", url, body, content_type=content_type)


# --- conversations ------------------------------------------------------------------------


def test_it_creates_a_conversation_with_the_default_budget(api, user, settings):
    settings.LCM_DEFAULT_TOKEN_BUDGET = 64000
    response = api.post("/api/v1/conversations/", {"session_id": "s-1"}, format="json")
    assert response.status_code == 201
    body = response.json()
    stored = Conversation.objects.get()
    assert body["id"] == stored.pk
    assert (body["session_id"], body["title"], body["token_budget"], body["owner"]) == (
        "s-1",
        "",
        64000,
        "owner",
    )
    assert (stored.owner_id, stored.token_budget) == (user.pk, 64000)


def test_creating_the_same_session_again_returns_the_existing_conversation(api):
    first = api.post(
        "/api/v1/conversations/",
        {"session_id": "s-1", "title": "first", "token_budget": 5000},
        format="json",
    )
    again = api.post(
        "/api/v1/conversations/", {"session_id": "s-1", "title": "second"}, format="json"
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert (again.json()["title"], again.json()["token_budget"]) == ("first", 5000)
    assert Conversation.objects.count() == 1


def test_two_users_may_use_the_same_session_id(api, other_api):
    mine = api.post("/api/v1/conversations/", {"session_id": "shared"}, format="json")
    theirs = other_api.post("/api/v1/conversations/", {"session_id": "shared"}, format="json")
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]


def test_the_list_filters_by_session_id(api, make_conversation):
    wanted = make_conversation(session_id="wanted")
    make_conversation(session_id="other")
    response = api.get("/api/v1/conversations/", {"session_id": "wanted"})
    assert response.status_code == 200
    assert [c["id"] for c in response.json()["results"]] == [wanted.pk]
    assert api.get("/api/v1/conversations/", {"session_id": "nope"}).json()["results"] == []


def test_the_list_pages_newest_first_with_a_next_link(api, make_conversation):
    made = [make_conversation(session_id=f"s{i}").pk for i in range(5)]
    first = api.get("/api/v1/conversations/", {"limit": 2}).json()
    assert [c["id"] for c in first["results"]] == made[::-1][:2]
    assert first["next"]
    rest = []
    url = first["next"]
    while url:
        page = api.get(url).json()
        rest += [c["id"] for c in page["results"]]
        url = page["next"]
    assert rest == made[::-1][2:]


def test_the_detail_counts_messages_context_and_summaries_by_kind(api, make_conversation):
    conversation = make_conversation(messages=4)
    now = timezone.now()
    for suffix, kind, depth in (("1", "leaf", 0), ("2", "leaf", 0), ("3", "condensed", 1)):
        Summary.objects.create(
            id=f"sum_{suffix:0>16}",
            conversation=conversation,
            kind=kind,
            depth=depth,
            content="s",
            token_count=7,
            earliest_at=now - timedelta(seconds=1),
            latest_at=now,
            created_at=now,
        )
    response = api.get(_url(conversation.pk))
    assert response.status_code == 200
    body = response.json()
    tokens = sum(
        Message.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )
    assert body["id"] == conversation.pk
    assert body["message_count"] == 4
    assert body["context_item_count"] == 4
    assert body["context_tokens"] == tokens > 0
    assert body["summaries"] == {"leaf": 2, "condensed": 1}


def test_the_detail_of_an_empty_conversation_has_zero_counts(api, conversation):
    body = api.get(_url(conversation.pk)).json()
    assert (body["message_count"], body["context_item_count"], body["context_tokens"]) == (0, 0, 0)
    assert body["summaries"] == {"leaf": 0, "condensed": 0}


# --- appending --------------------------------------------------------------------------


def test_it_appends_one_message(api, conversation):
    response = api.post(
        _url(conversation.pk, "messages/"), {"role": "user", "content": "x" * 40}, format="json"
    )
    assert response.status_code == 201
    stored = Message.objects.get(conversation=conversation)
    assert response.json() == {"id": stored.pk, "seq": 1, "token_count": 10, "created": True}
    assert ContextItem.objects.get(conversation=conversation).message_id == stored.pk


def test_it_appends_a_batch_with_parts_in_order(api, conversation):
    batch = [message_payload(i) for i in range(6)]
    response = api.post(_url(conversation.pk, "messages/"), {"messages": batch}, format="json")
    assert response.status_code == 201
    results = response.json()["messages"]
    stored = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    assert [r["seq"] for r in results] == [1, 2, 3, 4, 5, 6]
    assert [r["id"] for r in results] == [m.pk for m in stored]
    assert [r["token_count"] for r in results] == [m.token_count for m in stored]
    assert all(r["created"] for r in results)
    assert [m.role for m in stored] == ["user", "assistant", "tool"] * 2
    assert MessagePart.objects.filter(message__conversation=conversation).count() == 6


def test_resending_an_external_id_returns_the_original_with_200(api, conversation):
    url = _url(conversation.pk, "messages/")
    first = api.post(url, {"role": "user", "content": "hi", "external_id": "e1"}, format="json")
    again = api.post(
        url, {"role": "user", "content": "changed", "external_id": "e1"}, format="json"
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == {**first.json(), "created": False}
    assert Message.objects.get(conversation=conversation).content == "hi"
    assert ContextItem.objects.filter(conversation=conversation).count() == 1


def test_a_batch_that_is_all_resent_answers_200_and_stores_nothing(api, conversation):
    url = _url(conversation.pk, "messages/")
    batch = [{"role": "user", "content": f"m{i}", "external_id": f"e{i}"} for i in range(3)]
    first = api.post(url, {"messages": batch}, format="json")
    before = _stored()
    again = api.post(url, {"messages": batch}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert [r["id"] for r in again.json()["messages"]] == [
        r["id"] for r in first.json()["messages"]
    ]
    assert _stored() == before


def test_appending_to_a_missing_conversation_is_404(api, db):
    body = _error(
        api.post(_url(999999, "messages/"), {"role": "user", "content": "x"}, format="json"), 404
    )
    assert body["code"] == "not_found"
    assert Message.objects.count() == 0


def test_tool_input_may_be_any_json_value(api, conversation):
    values = [{"a": [1, {"b": None}]}, [1, 2], "text", 3.5, True]
    batch = [
        {
            "role": "assistant",
            "content": "calling",
            "parts": [{"part_type": "tool", "tool_name": "t", "tool_input": value}],
        }
        for value in values
    ]
    response = api.post(_url(conversation.pk, "messages/"), {"messages": batch}, format="json")
    assert response.status_code == 201
    stored = list(
        MessagePart.objects.filter(message__conversation=conversation)
        .order_by("message__seq")
        .values_list("tool_input", flat=True)
    )
    assert stored == values


def test_every_part_column_round_trips_through_the_api(api, conversation):
    part = {
        "part_type": "step_finish",
        "ordinal": 3,
        "text_content": "done",
        "is_ignored": False,
        "is_synthetic": True,
        "tool_call_id": "c1",
        "tool_name": "bash",
        "tool_status": "completed",
        "tool_input": {"cmd": "ls"},
        "tool_output": "a\nb",
        "tool_error": "none",
        "tool_title": "List",
        "patch_hash": "abc",
        "patch_files": ["a.py", "b.py"],
        "file_mime": "text/plain",
        "file_name": "a.txt",
        "file_url": "file:///a.txt",
        "subtask_prompt": "p",
        "subtask_desc": "d",
        "subtask_agent": "general",
        "step_reason": "stop",
        "step_cost": "0.00120000",
        "step_tokens_in": 1200,
        "step_tokens_out": 80,
        "snapshot_hash": "snap",
        "compaction_auto": True,
        "metadata": {"k": "v"},
    }
    response = api.post(
        _url(conversation.pk, "messages/"),
        {"role": "assistant", "content": "c", "parts": [part]},
        format="json",
    )
    assert response.status_code == 201
    listed = api.get(_url(conversation.pk, "messages/")).json()["results"]
    assert listed[0]["parts"] == [part]


# --- reading messages and the context ---------------------------------------------------


def test_messages_are_listed_in_seq_order_with_their_parts(api, conversation):
    append_messages(conversation, 5)
    response = api.get(_url(conversation.pk, "messages/"))
    assert response.status_code == 200
    results = response.json()["results"]
    assert [m["seq"] for m in results] == [1, 2, 3, 4, 5]
    assert results[1]["parts"][1]["tool_input"] == {
        "command": "pytest tests/test_cache.py -k case_1"
    }
    assert response.json()["next"] is None


def test_message_pages_follow_next_links_through_every_seq(api, conversation):
    append_messages(conversation, 25)
    seqs, url, pages = [], _url(conversation.pk, "messages/") + "?limit=10", 0
    while url:
        page = api.get(url).json()
        seqs += [m["seq"] for m in page["results"]]
        url = page["next"]
        pages += 1
    assert seqs == list(range(1, 26))
    assert pages == 3


def test_a_page_holds_up_to_1000_and_a_larger_limit_is_clamped(api, conversation):
    append_messages(conversation, 1005)
    url = _url(conversation.pk, "messages/")
    full = api.get(url, {"limit": 1000}).json()
    assert len(full["results"]) == 1000
    clamped = api.get(url, {"limit": 5000}).json()
    assert [m["seq"] for m in clamped["results"]] == list(range(1, 1001))
    rest = api.get(clamped["next"]).json()
    assert [m["seq"] for m in rest["results"]] == [1001, 1002, 1003, 1004, 1005]


@pytest.mark.parametrize("limit", ["0", "-5", "abc", "1.5", ""])
def test_a_nonsense_limit_is_a_400_naming_it(api, conversation, limit):
    # The schema says limit is an integer from 1: anything else is refused, not ignored.
    append_messages(conversation, 3)
    body = _error(api.get(_url(conversation.pk, "messages/"), {"limit": limit}), 400)
    assert body["extra"]["field"] == "limit"


def test_a_forged_cursor_is_a_404_in_the_error_shape(api, conversation):
    body = _error(api.get(_url(conversation.pk, "messages/"), {"cursor": "garbage"}), 404)
    assert body["code"] == "not_found"


@pytest.mark.parametrize("position", ["abc", "1.5", "", "99999999999999999999999999"])
def test_a_cursor_with_a_forged_position_is_a_404_or_an_empty_page(api, conversation, position):
    append_messages(conversation, 3)
    cursor = base64.b64encode(f"p={position}".encode()).decode()
    response = api.get(_url(conversation.pk, "messages/"), {"cursor": cursor})
    if response.status_code == 200:
        assert response.json()["results"] == []
    else:
        assert _error(response, 404)["code"] == "not_found"


def test_listing_messages_costs_a_fixed_number_of_queries(
    api, conversation, django_assert_num_queries
):
    append_messages(conversation, 30)
    # token auth, access checkpoint, the page of messages, their parts
    with django_assert_num_queries(4):
        response = api.get(_url(conversation.pk, "messages/"), {"limit": 30})
    assert len(response.json()["results"]) == 30


def test_context_items_are_listed_in_ordinal_order(api, conversation):
    messages = append_messages(conversation, 12)
    response = api.get(_url(conversation.pk, "context-items/"), {"limit": 5})
    assert response.status_code == 200
    page = response.json()
    assert page["results"][0] == {
        "ordinal": 1,
        "item_type": "message",
        "message_id": messages[0].pk,
        "summary_id": None,
        "token_count": messages[0].token_count,
    }
    ordinals = [i["ordinal"] for i in page["results"]]
    url = page["next"]
    while url:
        page = api.get(url).json()
        ordinals += [i["ordinal"] for i in page["results"]]
        url = page["next"]
    assert ordinals == list(range(1, 13))


def test_listing_context_items_costs_a_fixed_number_of_queries(
    api, conversation, django_assert_num_queries
):
    append_messages(conversation, 30)
    with django_assert_num_queries(3):
        response = api.get(_url(conversation.pk, "context-items/"), {"limit": 30})
    assert len(response.json()["results"]) == 30


# --- bad input: 4xx in the one error shape, nothing stored ------------------------------

BAD_MESSAGES = {
    "unknown role": ({"role": "wizard", "content": "x"}, "role"),
    "missing role": ({"content": "x"}, "role"),
    "unknown part type": (
        {"role": "user", "content": "x", "parts": [{"part_type": "hologram"}]},
        "parts[0].part_type",
    ),
    "empty content without parts": ({"role": "user", "content": "   "}, "content"),
    "no content and no parts": ({"role": "user"}, "content"),
    "client seq": ({"role": "user", "content": "x", "seq": 5}, "seq"),
    "unknown field": ({"role": "user", "content": "x", "colour": "red"}, "colour"),
    "unknown part field": (
        {"role": "user", "content": "x", "parts": [{"part_type": "text", "colour": "red"}]},
        "parts[0].colour",
    ),
    "content a number": ({"role": "user", "content": 42}, "content"),
    "content a list": ({"role": "user", "content": ["a"]}, "content"),
    "parts a string": ({"role": "user", "content": "x", "parts": "text"}, "parts"),
    "parts an object": ({"role": "user", "content": "x", "parts": {}}, "parts"),
    "parts false": ({"role": "user", "content": "x", "parts": False}, "parts"),
    "part not an object": ({"role": "user", "content": "x", "parts": ["text"]}, "parts[0]"),
    "step_tokens_in a string": (
        {
            "role": "user",
            "content": "x",
            "parts": [{"part_type": "step_finish", "step_tokens_in": "9"}],
        },
        "parts[0].step_tokens_in",
    ),
    "step_tokens_in too big for the column": (
        {
            "role": "user",
            "content": "x",
            "parts": [{"part_type": "step_finish", "step_tokens_in": 2**40}],
        },
        "parts[0].step_tokens_in",
    ),
    "step_cost not a number": (
        {
            "role": "user",
            "content": "x",
            "parts": [{"part_type": "step_finish", "step_cost": "cheap"}],
        },
        "parts[0].step_cost",
    ),
    "step_cost infinite": (
        {
            "role": "user",
            "content": "x",
            "parts": [{"part_type": "step_finish", "step_cost": "Infinity"}],
        },
        "parts[0].step_cost",
    ),
    "step_cost too large for the column": (
        {
            "role": "user",
            "content": "x",
            "parts": [{"part_type": "step_finish", "step_cost": 1e30}],
        },
        "parts[0].step_cost",
    ),
    "part ordinal too large for the column": (
        {"role": "user", "content": "x", "parts": [{"part_type": "text", "ordinal": 2**40}]},
        "parts[0].ordinal",
    ),
    "part ordinal negative": (
        {"role": "user", "content": "x", "parts": [{"part_type": "text", "ordinal": -1}]},
        "parts[0].ordinal",
    ),
    "two parts share an ordinal": (
        {
            "role": "user",
            "content": "x",
            "parts": [
                {"part_type": "text", "ordinal": 1, "text_content": "a"},
                {"part_type": "text", "ordinal": 1, "text_content": "b"},
            ],
        },
        "parts",
    ),
    "patch_files not a list of strings": (
        {"role": "user", "content": "x", "parts": [{"part_type": "patch", "patch_files": [1]}]},
        "parts[0].patch_files",
    ),
    "metadata not an object": (
        {"role": "user", "content": "x", "parts": [{"part_type": "text", "metadata": [1]}]},
        "parts[0].metadata",
    ),
    "tool_call_id over 255 characters": (
        {
            "role": "user",
            "content": "x",
            "parts": [{"part_type": "tool", "tool_call_id": "c" * 256}],
        },
        "parts[0].tool_call_id",
    ),
    "external_id a number": ({"role": "user", "content": "x", "external_id": 7}, "external_id"),
    "external_id empty": ({"role": "user", "content": "x", "external_id": ""}, "external_id"),
    "external_id over 255 characters": (
        {"role": "user", "content": "x", "external_id": "e" * 256},
        "external_id",
    ),
    "created_at without a zone": (
        {"role": "user", "content": "x", "created_at": "2024-01-01T10:00:00"},
        "created_at",
    ),
    "created_at not a date": (
        {"role": "user", "content": "x", "created_at": "yesterday"},
        "created_at",
    ),
    "created_at an impossible day": (
        {"role": "user", "content": "x", "created_at": "2024-02-30T10:00:00+00:00"},
        "created_at",
    ),
    "created_at out of range in UTC": (
        {"role": "user", "content": "x", "created_at": "9999-12-31T23:59:59-14:00"},
        "created_at",
    ),
}


@pytest.mark.parametrize("case", BAD_MESSAGES, ids=list(BAD_MESSAGES))
def test_it_refuses_a_bad_message_and_stores_nothing(api, conversation, case):
    payload, field = BAD_MESSAGES[case]
    before = _stored()
    body = _error(api.post(_url(conversation.pk, "messages/"), payload, format="json"), 400)
    assert body["code"] == "invalid"
    assert body["extra"]["field"] == field
    assert _stored() == before
    conversation.refresh_from_db()
    assert conversation.last_seq == 0


@pytest.mark.parametrize("case", BAD_MESSAGES, ids=list(BAD_MESSAGES))
def test_it_refuses_a_batch_with_one_bad_message_and_names_its_index(api, conversation, case):
    payload, field = BAD_MESSAGES[case]
    batch = [{"role": "user", "content": f"good {i}"} for i in range(10)]
    batch[7] = payload
    before = _stored()
    body = _error(
        api.post(_url(conversation.pk, "messages/"), {"messages": batch}, format="json"), 400
    )
    assert body["extra"]["index"] == 7
    assert body["extra"]["field"] == field
    assert body["message"].startswith("messages[7]: ")
    assert _stored() == before


def test_it_refuses_a_batch_over_1000_messages(api, conversation):
    batch = [{"role": "user", "content": "x"} for _ in range(1001)]
    body = _error(
        api.post(_url(conversation.pk, "messages/"), {"messages": batch}, format="json"), 400
    )
    assert body["extra"] == {"field": "messages", "limit": 1000}
    assert "1001" in body["message"]
    assert Message.objects.count() == 0


def test_a_batch_of_exactly_1000_messages_is_accepted(api, conversation):
    batch = [{"role": "user", "content": f"m{i}"} for i in range(1000)]
    response = api.post(_url(conversation.pk, "messages/"), {"messages": batch}, format="json")
    assert response.status_code == 201
    assert [r["seq"] for r in response.json()["messages"]][-1] == 1000
    assert Message.objects.filter(conversation=conversation).count() == 1000


def test_a_repeated_external_id_inside_one_batch_is_a_resend_of_the_first(api, conversation):
    batch = [
        {"role": "user", "content": "a", "external_id": "dup"},
        {"role": "user", "content": "b", "external_id": "other"},
        {"role": "user", "content": "c", "external_id": "dup"},
    ]
    response = api.post(_url(conversation.pk, "messages/"), {"messages": batch}, format="json")
    assert response.status_code == 201, response.content
    answered = response.json()["messages"]
    assert [(m["seq"], m["created"]) for m in answered] == [(1, True), (2, True), (1, False)]
    assert answered[2]["id"] == answered[0]["id"]
    assert list(Message.objects.order_by("seq").values_list("external_id", "content")) == [
        ("dup", "a"),
        ("other", "b"),
    ]
    assert Conversation.objects.get(pk=conversation.pk).last_seq == 2


@pytest.mark.parametrize(
    "payload",
    [
        {"messages": []},
        {"messages": "all"},
        {"messages": [{"role": "user", "content": "x"}], "x": 1},
    ],
    ids=["empty batch", "messages not a list", "extra key beside messages"],
)
def test_it_refuses_a_malformed_batch_envelope(api, conversation, payload):
    body = _error(api.post(_url(conversation.pk, "messages/"), payload, format="json"), 400)
    assert body["extra"]["field"] == "messages"
    assert Message.objects.count() == 0


RAW_BODIES = {
    "not JSON": b"role=user&content=hi",
    "truncated JSON": b'{"role": "user", "content": "hi"',
    "empty body": b"",
    "whitespace body": b"   \n",
    "an array": b'[{"role": "user", "content": "hi"}]',
    "a bare string": b'"hello"',
    "NaN": b'{"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": NaN}]}',
    "Infinity": b'{"role": "user", "content": "x", "parts": [{"part_type": "step_finish", "step_cost": Infinity}]}',
    "-Infinity": b'{"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": -Infinity}]}',
    "NUL in content": b'{"role": "user", "content": "a\\u0000b"}',
    "NUL in part text": b'{"role": "user", "content": "x", "parts": [{"part_type": "text", "text_content": "a\\u0000"}]}',
    "NUL in a nested tool_input key": b'{"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": {"a": {"k\\u0000": 1}}}]}',
    "NUL in a nested tool_input value": b'{"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": {"a": ["ok", "v\\u0000"]}}]}',
    "NUL in external_id": b'{"role": "user", "content": "x", "external_id": "e\\u0000"}',
    "lone high surrogate": b'{"role": "user", "content": "\\ud800"}',
    "lone low surrogate in a part": b'{"role": "user", "content": "x", "parts": [{"part_type": "text", "text_content": "\\udc00z"}]}',
    "invalid UTF-8 bytes": b'{"role": "user", "content": "\xff\xfe"}',
    "a NUL byte in the raw body": b'{"role": "user", "content": "a\x00b"}',
    "a float that overflows to infinity": b'{"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": {"n": 1e400}}]}',
    "tool_input nested past the depth limit": (
        b'{"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": '
        + b"[" * 80
        + b"]" * 80
        + b"}]}"
    ),
    "a body nested past the recursion limit": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("case", RAW_BODIES, ids=list(RAW_BODIES))
def test_it_refuses_an_unparseable_or_unstorable_body(api, conversation, case):
    before = _stored()
    body = _error(_post_raw(api, _url(conversation.pk, "messages/"), RAW_BODIES[case]), 400)
    assert body["code"] in {"malformed_request", "invalid"}
    assert _stored() == before


def test_the_error_names_the_path_of_a_nul_character(api, conversation):
    raw = b'{"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": {"a": ["ok", "v\\u0000"]}}]}'
    body = _error(_post_raw(api, _url(conversation.pk, "messages/"), raw), 400)
    assert body["code"] == "malformed_request"
    assert body["message"] == "$.parts[0].tool_input.a[1] contains a NUL character"


def test_tool_input_nested_within_the_limit_is_stored(api, conversation):
    nested: list = []
    for _ in range(40):
        nested = [nested]
    response = api.post(
        _url(conversation.pk, "messages/"),
        {"role": "user", "content": "x", "parts": [{"part_type": "tool", "tool_input": nested}]},
        format="json",
    )
    assert response.status_code == 201
    assert MessagePart.objects.get().tool_input == nested
    listed = api.get(_url(conversation.pk, "messages/"))
    assert listed.json()["results"][0]["parts"][0]["tool_input"] == nested


def test_a_surrogate_pair_is_fine(api, conversation):
    response = _post_raw(
        api,
        _url(conversation.pk, "messages/"),
        b'{"role": "user", "content": "smile \\ud83d\\ude00"}',
    )
    assert response.status_code == 201
    assert Message.objects.get().content == "smile \U0001f600"


def test_it_refuses_a_form_encoded_body_as_unsupported(api, conversation):
    body = _error(
        _post_raw(
            api,
            _url(conversation.pk, "messages/"),
            "role=user&content=hi",
            content_type="application/x-www-form-urlencoded",
        ),
        415,
    )
    assert body["code"] == "unsupported_media_type"
    assert Message.objects.count() == 0


def test_it_refuses_a_body_over_the_size_limit_with_413(api, conversation, settings):
    settings.LCM_MAX_REQUEST_BYTES = 2048
    payload = json.dumps({"role": "user", "content": "x" * 3000})
    body = _error(_post_raw(api, _url(conversation.pk, "messages/"), payload), 413)
    assert body["code"] == "payload_too_large"
    assert body["extra"] == {"limit": 2048}
    assert Message.objects.count() == 0
    small = _post_raw(
        api, _url(conversation.pk, "messages/"), json.dumps({"role": "user", "content": "ok"})
    )
    assert small.status_code == 201


BAD_CONVERSATIONS = {
    "missing session_id": ({"title": "t"}, "session_id"),
    "empty session_id": ({"session_id": ""}, "session_id"),
    "session_id over 255 characters": ({"session_id": "s" * 256}, "session_id"),
    "session_id an object": ({"session_id": {"a": 1}}, "session_id"),
    "token_budget a word": ({"session_id": "s", "token_budget": "lots"}, "token_budget"),
    "token_budget zero": ({"session_id": "s", "token_budget": 0}, "token_budget"),
    "token_budget huge": ({"session_id": "s", "token_budget": 10**12}, "token_budget"),
    "title null": ({"session_id": "s", "title": None}, "title"),
    "unknown field": ({"session_id": "s", "token_budge": 5000}, "token_budge"),
}


@pytest.mark.parametrize("case", BAD_CONVERSATIONS, ids=list(BAD_CONVERSATIONS))
def test_it_refuses_a_bad_conversation_and_stores_nothing(api, user, case):
    payload, field = BAD_CONVERSATIONS[case]
    body = _error(api.post("/api/v1/conversations/", payload, format="json"), 400)
    assert body["code"] == "invalid"
    assert field in body["extra"]["fields"]
    assert body["message"].startswith(f"{field}: ")
    assert Conversation.objects.count() == 0


def test_a_nul_in_the_session_id_filter_is_a_400_not_a_500(api, conversation):
    body = _error(api.get("/api/v1/conversations/", {"session_id": "a\x00b"}), 400)
    assert body["extra"]["field"] == "session_id"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nothing-here/",
        "/api/v1/conversations/abc/",
        "/api/v1/conversations/1/unknown/",
    ],
)
def test_an_unknown_api_path_is_a_404_in_the_error_shape(api, db, path):
    body = _error(api.get(path), 404)
    assert body["code"] == "not_found"


def test_a_conversation_id_beyond_bigint_is_a_404(api, db):
    body = _error(api.get(_url(10**30, "messages/")), 404)
    assert body["code"] == "not_found"


@pytest.mark.parametrize(
    ("method", "tail"),
    [
        ("put", "messages/"),
        ("patch", "messages/"),
        ("delete", "messages/"),
        ("put", ""),
        ("post", "context-items/"),
    ],
)
def test_a_wrong_method_is_a_405_in_the_error_shape_and_changes_nothing(
    api, conversation, method, tail
):
    append_messages(conversation, 2)
    before = _stored()
    response = getattr(api, method)(_url(conversation.pk, tail), {"role": "user"}, format="json")
    body = _error(response, 405)
    assert body["code"] == "method_not_allowed"
    assert _stored() == before


def test_a_wrong_method_on_the_list_is_a_405(api, db):
    assert _error(api.delete("/api/v1/conversations/"), 405)["code"] == "method_not_allowed"


def test_a_bad_token_is_a_401_in_the_error_shape(anon_api, conversation):
    anon_api.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    body = _error(
        anon_api.post(
            _url(conversation.pk, "messages/"), {"role": "user", "content": "x"}, format="json"
        ),
        401,
    )
    assert body["code"] == "authentication_failed"
    assert Message.objects.count() == 0


def test_a_missing_token_is_a_401_with_a_challenge(anon_api, conversation):
    response = anon_api.get(_url(conversation.pk))
    body = _error(response, 401)
    assert body["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Token"


# --- cost and failure ---------------------------------------------------------------------


def _assistant_turn(i: int) -> dict:
    return {
        "role": "assistant",
        "content": f"turn {i}",
        "parts": [
            {"part_type": "text", "text_content": f"turn {i}"},
            {"part_type": "tool", "tool_name": "bash", "tool_input": {"n": i}},
        ],
    }


def test_a_batch_costs_a_fixed_number_of_queries_whatever_its_size(api, conversation):
    url = _url(conversation.pk, "messages/")
    counts = []
    for size in (1, 40, 100):  # PostgreSQL: up to 32, one statement; more, COPY
        batch = [_assistant_turn(len(counts) * 1000 + i) for i in range(size)]
        with CaptureQueriesContext(connection) as queries:
            assert api.post(url, {"messages": batch}, format="json").status_code == 201
        counts.append(len(queries.captured_queries))
    assert counts[1] == counts[2], counts
    assert counts[0] <= counts[1], counts
    assert MessagePart.objects.filter(message__conversation=conversation).count() == 2 * 141


def test_the_detail_costs_a_fixed_number_of_queries(
    api, make_conversation, django_assert_num_queries
):
    conversation = make_conversation(messages=40)
    # token auth, access checkpoint, context aggregate, summaries by kind, owner name
    with django_assert_num_queries(5):
        assert api.get(_url(conversation.pk)).status_code == 200


def exploding_estimator(text: str) -> int:
    """A configured estimator that fails, to see how an unexpected error is answered."""
    raise RuntimeError("estimator is down")


def test_an_unexpected_error_is_a_500_in_the_error_shape_and_stores_nothing(
    api, conversation, settings
):
    settings.LCM_TOKEN_ESTIMATOR = f"{__name__}.exploding_estimator"
    before = _stored()
    response = api.post(
        _url(conversation.pk, "messages/"), {"role": "user", "content": "x"}, format="json"
    )
    body = _error(response, 500)
    assert body == {"code": "server_error", "message": "internal server error", "extra": {}}
    assert "estimator is down" not in response.content.decode()
    assert _stored() == before


def test_a_content_length_that_is_not_a_number_is_a_400(api, conversation):
    response = api.generic(
        "POST",
        _url(conversation.pk, "messages/"),
        b'{"role": "user", "content": "x"}',
        content_type="application/json",
        CONTENT_LENGTH="abc",
    )
    assert _error(response, 400)["code"] == "malformed_request"
    assert Message.objects.count() == 0
