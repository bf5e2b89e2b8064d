"""The receipts API (docs/receipts.md): the timeline, one receipt, its replay (raw and JSON,
exact until a redaction, which it then names) and its diff; the access checkpoint; the
one error shape."""

from __future__ import annotations

import json

import pytest

from receipts.models import Receipt
from tests.receipts.calls import offline_calls

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(user, offline_engine, small_chunks):
    small_chunks.LCM_FRESH_TAIL_COUNT = 2
    small_chunks.LCM_LEAF_MIN_FANOUT = 2
    return offline_calls(user)


def test_the_timeline_lists_every_call_oldest_first(api, calls):
    conversation_id, receipts = calls
    page = api.get(f"/api/v1/conversations/{conversation_id}/receipts/?limit=2").json()
    assert [r["id"] for r in page["results"]] == [r.id for r in receipts[:2]]
    rest = api.get(page["next"]).json()
    assert [r["id"] for r in rest["results"]] == [r.id for r in receipts[2:4]]
    assert all(r["site"] == "turn" and r["wire"] == "offline" for r in page["results"])


def test_a_receipt_names_its_items_and_what_came_back(api, calls):
    _conversation_id, receipts = calls
    body = api.get(f"/api/v1/receipts/{receipts[-1].id}/").json()
    kinds = {i["kind"] for i in body["items"]}
    assert {"state", "summary", "message"} <= kinds
    summary = next(i for i in body["items"] if i["kind"] == "summary")
    assert summary["reason"] == "summary" and summary["why"].startswith("summary standing for")
    assert "covers messages #" in summary["why"] and summary["in_body"]
    assert len(summary["content_hash"]) == 64
    assert body["response"]["status"] == "completed" and body["response"]["usage"]["output_tokens"]
    assert body["stored_bytes"] < 300 + 8 * len(body["items"]) + 200


def test_the_replay_is_the_body_sent_raw_or_as_json(api, calls):
    _conversation_id, receipts = calls
    raw = api.get(f"/api/v1/receipts/{receipts[0].id}/request/?as=raw")
    assert raw["X-LCM-Replay-Exact"] == "true"
    assert len(raw.content) == receipts[0].body_bytes
    as_json = api.get(f"/api/v1/receipts/{receipts[0].id}/request/").json()
    assert as_json["exact"] is True and as_json["body"] == json.loads(raw.content)


def test_the_diff_defaults_to_the_previous_call_and_names_the_summary(api, calls):
    _conversation_id, receipts = calls
    crossing = receipts[3]  # the first call after the compaction
    diff = api.get(f"/api/v1/receipts/{crossing.id}/diff/").json()
    assert diff["against_id"] == receipts[2].id
    assert diff["summarized"] and diff["summarized"][0]["summary_id"].startswith("sum_")
    assert diff["cache"]["changed"] is True and diff["cache"]["item"] is not None
    first = api.get(f"/api/v1/receipts/{receipts[0].id}/diff/")
    assert first.status_code == 400 and first.json()["code"] == "invalid"


def test_another_users_receipts_do_not_exist(other_api, calls):
    conversation_id, receipts = calls
    for url in (
        f"/api/v1/receipts/{receipts[0].id}/",
        f"/api/v1/receipts/{receipts[0].id}/request/",
        f"/api/v1/receipts/{receipts[1].id}/diff/?against={receipts[0].id}",
        f"/api/v1/conversations/{conversation_id}/receipts/",
        "/api/v1/receipts/01ARZ3NDEKTSV4RRFFQ69G5FAV/",
    ):
        answer = other_api.get(url)
        assert answer.status_code == 404, url
        assert answer.json()["code"] == "not_found"


def test_bad_parameters_are_a_400_in_the_error_shape(api, calls):
    conversation_id, receipts = calls
    bad = api.get(f"/api/v1/receipts/{receipts[0].id}/request/?as=xml")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert api.get(f"/api/v1/conversations/{conversation_id}/receipts/?limit=0").status_code == 400
    assert (
        api.get(f"/api/v1/conversations/{conversation_id}/receipts/?cursor=zzz").status_code == 404
    )


def test_after_a_redaction_the_replay_shows_the_marker_and_says_so(
    api, calls, django_capture_on_commit_callbacks, settings
):
    conversation_id, receipts = calls
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}  # the job runs at the commit
    with django_capture_on_commit_callbacks(execute=True):
        answer = api.post(
            f"/api/v1/conversations/{conversation_id}/redactions/",
            {"literal": "river Douro", "reason": "test"},
            format="json",
        )
    assert answer.status_code == 202, answer.content
    assert api.get(answer.json()["url"]).json()["state"] == "done"
    replay = api.get(f"/api/v1/receipts/{receipts[-1].id}/request/").json()
    assert replay["exact"] is False
    assert "redacted" in replay["note"] and replay["changed"]
    text = json.dumps(replay["body"])
    assert "[redacted" in text and "river Douro" not in text
    assert Receipt.objects.filter(conversation_id=conversation_id).count() == len(receipts)
