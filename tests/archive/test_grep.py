"""Grep over archived ranges: without include_archived the database no longer finds archived
content (its full-text rows went with it); with it, segments are scanned, hits marked."""

from __future__ import annotations

import pytest

from archive.services import segment_archive

URL = "/api/v1/grep/"


def _grep(api, conversation, **body):
    response = api.post(URL, {"conversation_id": conversation.pk, "limit": 100, **body},
                        format="json")  # fmt: skip
    assert response.status_code == 200, response.content
    return response.json()["results"]


@pytest.mark.parametrize(
    ("mode", "query"),
    [("full_text", "please check deploy"), ("regex", r"case_8 - Timeout")],
)
def test_include_archived_finds_archived_messages(compacted, api, mode, query):
    conversation, _ = compacted
    before = _grep(api, conversation, mode=mode, query=query, scope="messages")
    expected = [h["seq"] for h in before if h["seq"] <= 40]
    assert expected and all("from_archive" not in h for h in before)
    segment_archive(conversation=conversation, seq_from=1, seq_to=40)

    without = _grep(api, conversation, mode=mode, query=query, scope="messages")
    with_archived = _grep(api, conversation, mode=mode, query=query, scope="messages",
                          include_archived=True)  # fmt: skip

    assert [h["seq"] for h in without] == [h["seq"] for h in before if h["seq"] > 40]
    archived_hits = [h for h in with_archived if h.get("from_archive")]
    assert [h["seq"] for h in archived_hits] == expected
    by_id = {h["id"]: h for h in before}
    for hit in archived_hits:
        assert hit["covered_by"] == by_id[hit["id"]]["covered_by"]
        assert "«" in hit["snippet"]


def test_include_archived_merges_database_and_archive_hits(compacted, api):
    conversation, _ = compacted
    before = _grep(api, conversation, mode="full_text", query="TimeoutError", scope="messages")
    segment_archive(conversation=conversation, seq_from=1, seq_to=40)

    after = _grep(api, conversation, mode="full_text", query="TimeoutError", scope="messages",
                  include_archived=True)  # fmt: skip

    assert sorted(h["seq"] for h in after) == sorted(h["seq"] for h in before)
    assert {h["seq"] for h in after if h.get("from_archive")} == {
        h["seq"] for h in before if h["seq"] <= 40
    }
    assert [h["created_at"] for h in after] == sorted(
        (h["created_at"] for h in after), reverse=True
    )


def test_a_bad_regex_over_archived_ranges_is_a_400(compacted, api):
    conversation, _ = compacted
    segment_archive(conversation=conversation, seq_from=1, seq_to=40)
    response = api.post(URL, {"conversation_id": conversation.pk, "mode": "regex",
                              "query": "(", "include_archived": True}, format="json")  # fmt: skip
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_regex"


def test_the_grep_tool_scans_archived_ranges_when_asked(compacted, user):
    import json

    from retrieval.tools import tool_call_for_user

    conversation, _ = compacted
    segment_archive(conversation=conversation, seq_from=1, seq_to=40)
    ask = {"query": "case_8 - Timeout", "mode": "regex", "scope": "messages"}

    plain = tool_call_for_user(
        user=user, name="lcm_grep", input=ask, conversation_id=conversation.pk
    )
    scanned = tool_call_for_user(user=user, name="lcm_grep", conversation_id=conversation.pk,
                                 input={**ask, "include_archived": True})  # fmt: skip

    assert json.loads(plain.content) == {"results": []}
    [hit] = json.loads(scanned.content)["results"]
    assert (hit["seq"], hit["from_archive"]) == (9, True)


def test_repeated_greps_over_more_segments_than_the_read_cache_read_each_segment_once(
    compacted, api, settings, monkeypatch
):
    """Issue 43: 72 segments against a 64-segment read cache made every grep read them all
    again (each scan evicted, in order, the segment it was about to read next)."""
    from archive import search_text, segments, selectors

    settings.LCM_ARCHIVE_CACHE_SEGMENTS = 2
    conversation, _ = compacted
    for first in (1, 11, 21, 31):
        segment_archive(conversation=conversation, seq_from=first, seq_to=first + 9)
    selectors.forget()
    search_text.forget()
    reads = []
    read = segments.read
    monkeypatch.setattr(segments, "read", lambda key: reads.append(key) or read(key))

    body = {"mode": "full_text", "query": "please check deploy", "scope": "messages"}
    first = _grep(api, conversation, include_archived=True, **body)
    assert len(reads) == 4
    again = _grep(api, conversation, include_archived=True, **body)
    regex = _grep(api, conversation, include_archived=True, mode="regex", query=r"Timeout\w+")

    assert len(reads) == 4  # each segment read once, for all three greps
    assert again == first and any(h.get("from_archive") for h in first)
    assert any(h.get("from_archive") for h in regex)
