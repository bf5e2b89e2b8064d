"""The summary DAG page and its detail/expand fragments, on lineage written by the engine."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from conversations.models import (
    ContextItem,
    Message,
    Summary,
    SummaryKind,
    SummaryMessage,
    SummaryParent,
)
from retrieval.selectors import covering_summaries
from tests.explorer.helpers import client_for


def text_of(user, path: str, params: dict | None = None) -> str:
    """The body of a GET as `user`."""
    return client_for(user).get(path, params).content.decode()


def dag_data(body: str) -> dict:
    match = re.search(r'<script id="dag-data" type="application/json">(.*?)</script>', body, re.S)
    assert match, "the page carries its DAG as a json_script block"
    return json.loads(match.group(1))


def test_the_dag_page_carries_every_summary_and_edge(user, compacted_by_engine):
    body = text_of(user, f"/conversations/{compacted_by_engine.pk}/dag/")
    data = dag_data(body)
    summaries = set(
        Summary.objects.filter(conversation=compacted_by_engine).values_list("id", flat=True)
    )
    assert {n["id"] for n in data["nodes"]} == summaries
    assert len(summaries) >= 3
    edges = set(
        SummaryParent.objects.filter(conversation=compacted_by_engine).values_list(
            "parent_summary_id", "summary_id"
        )
    )
    assert {(e["source"], e["target"]) for e in data["edges"]} == edges
    assert edges, "a full sweep of 120 messages condenses"
    in_context = set(
        ContextItem.objects.filter(
            conversation=compacted_by_engine, summary__isnull=False
        ).values_list("summary_id", flat=True)
    )
    assert {n["id"] for n in data["nodes"] if n["inContext"]} == in_context
    leaf = next(n for n in data["nodes"] if n["kind"] == "leaf")
    seqs = list(
        SummaryMessage.objects.filter(summary_id=leaf["id"]).values_list("message__seq", flat=True)
    )
    assert (leaf["firstSeq"], leaf["lastSeq"], leaf["messages"]) == (
        min(seqs),
        max(seqs),
        len(seqs),
    )
    assert '<script src="/static/explorer/vendor/cytoscape.min.js"></script>' in body
    assert '<script src="/static/explorer/vendor/cytoscape-dagre.min.js"></script>' in body


def test_a_message_link_highlights_its_path_to_the_covering_summary(user, compacted_by_engine):
    message = Message.objects.get(conversation=compacted_by_engine, seq=3)
    covering = covering_summaries(conversation_id=compacted_by_engine.pk, message_ids=[message.pk])
    assert covering[message.pk] is not None
    leaf = SummaryMessage.objects.get(message=message).summary_id
    body = text_of(user, f"/conversations/{compacted_by_engine.pk}/dag/?message=3")
    data = dag_data(body)
    assert data["covering"] == covering[message.pk]
    assert data["selected"] == covering[message.pk]
    assert leaf in data["path"] and covering[message.pk] in data["path"]
    # every summary on the path is an ancestor of the leaf (checked edge by edge)
    parents = dict(
        SummaryParent.objects.filter(conversation=compacted_by_engine).values_list(
            "parent_summary_id", "summary_id"
        )
    )
    walk, node = [leaf], leaf
    while node in parents:
        node = parents[node]
        walk.append(node)
    assert sorted(walk) == data["path"]


def test_the_timeline_links_compacted_messages_to_their_lineage(user, compacted_by_engine):
    body = text_of(user, f"/conversations/{compacted_by_engine.pk}/?from=1")
    message = Message.objects.get(conversation=compacted_by_engine, seq=1)
    covering = covering_summaries(conversation_id=compacted_by_engine.pk, message_ids=[message.pk])
    assert (
        f'<a class="cover covered" href="/conversations/{compacted_by_engine.pk}/dag/?message=1" '
        f'data-covering="{covering[message.pk]}">covered by {covering[message.pk]}</a>'
    ) in body


def test_summary_detail_shows_sources_and_what_is_built_on_it(user, compacted_by_engine):
    condensed = Summary.objects.filter(
        conversation=compacted_by_engine, kind=SummaryKind.CONDENSED
    ).first()
    sources = list(
        SummaryParent.objects.filter(summary=condensed)
        .order_by("ordinal")
        .values_list("parent_summary_id", flat=True)
    )
    client = client_for(user)
    body = client.get(
        f"/conversations/{compacted_by_engine.pk}/summaries/{condensed.pk}/"
    ).content.decode()
    links = re.findall(r'<dd class="sources">(.*?)</dd>', body, re.S)[0]
    assert re.findall(r'data-summary="(sum_[0-9a-f]+)"', links) == sources
    leaf_body = client.get(
        f"/conversations/{compacted_by_engine.pk}/summaries/{sources[0]}/"
    ).content.decode()
    built_on = re.findall(r'<dd class="built-on">(.*?)</dd>', leaf_body, re.S)[0]
    assert re.findall(r'data-summary="(sum_[0-9a-f]+)"', built_on) == [condensed.pk]


def test_expanding_a_leaf_shows_its_source_messages_in_order(user, compacted_by_engine):
    leaf = Summary.objects.filter(conversation=compacted_by_engine, kind=SummaryKind.LEAF).first()
    seqs = list(
        SummaryMessage.objects.filter(summary=leaf)
        .order_by("ordinal")
        .values_list("message__seq", flat=True)
    )
    body = text_of(user, f"/conversations/{compacted_by_engine.pk}/summaries/{leaf.pk}/expand/")
    assert [int(s) for s in re.findall(r'<article [^>]*data-seq="(\d+)"', body)] == seqs


def test_expanding_a_condensed_summary_shows_its_sources(user, compacted_by_engine):
    condensed = Summary.objects.filter(
        conversation=compacted_by_engine, kind=SummaryKind.CONDENSED
    ).first()
    sources = list(
        SummaryParent.objects.filter(summary=condensed)
        .order_by("ordinal")
        .values_list("parent_summary_id", flat=True)
    )
    body = text_of(
        user, f"/conversations/{compacted_by_engine.pk}/summaries/{condensed.pk}/expand/"
    )
    assert (
        re.findall(r'<div class="source-summary" data-summary="(sum_[0-9a-f]+)">', body) == sources
    )


def test_summary_fragments_follow_the_checkpoint(
    user, other_user, staff_user, compacted_by_engine, make_conversation
):
    summary = Summary.objects.filter(conversation=compacted_by_engine).first()
    url = f"/conversations/{compacted_by_engine.pk}/summaries/{summary.pk}/"
    assert client_for(other_user).get(url).status_code == 404
    assert client_for(other_user).get(f"{url}expand/").status_code == 404
    assert client_for(staff_user).get(url).status_code == 200
    # a summary id asked for under another conversation of the same user does not exist there
    elsewhere = make_conversation(messages=1)
    assert (
        client_for(user).get(f"/conversations/{elsewhere.pk}/summaries/{summary.pk}/").status_code
        == 404
    )
    assert Client().get(url).status_code == 302


def test_the_dag_page_query_count_is_fixed(user, compacted_by_engine, django_assert_num_queries):
    client = client_for(user)
    client.get(f"/conversations/{compacted_by_engine.pk}/dag/")
    # session, user, conversation, summaries, message ranges, edges, context summaries,
    # then the focused message and its lineage (2 CTEs)
    with django_assert_num_queries(7):
        client.get(f"/conversations/{compacted_by_engine.pk}/dag/")
    with django_assert_num_queries(10):
        client.get(f"/conversations/{compacted_by_engine.pk}/dag/?message=5")


def test_the_compacted_conversation_page_query_count_is_fixed(
    user, compacted_by_engine, django_assert_max_num_queries
):
    client = client_for(user)
    client.get(f"/conversations/{compacted_by_engine.pk}/")
    # as for a raw conversation, plus at most the assembler's read of the summaries it
    # renders (it caches renderings, so a warm page may skip that read), and its lookup of
    # the included messages by primary key, and the agent compactions it lists (one query
    # when there are none)
    with django_assert_max_num_queries(12):
        assert client.get(f"/conversations/{compacted_by_engine.pk}/?from=1").status_code == 200


@pytest.mark.parametrize("mode", ["full_text", "regex"])
def test_search_finds_messages_and_links_into_timeline_and_dag(user, compacted_by_engine, mode):
    body = text_of(
        user,
        f"/conversations/{compacted_by_engine.pk}/search/",
        {
            "q": "case_8" if mode == "full_text" else "case_8 ",
            "mode": mode,
            "scope": "messages",
        },
    )
    # message i of the factory is seq i + 1: the tool result "case_8" is message #9
    assert f'href="/conversations/{compacted_by_engine.pk}/?seq=9#m-9">message #9</a>' in body
    assert f'href="/conversations/{compacted_by_engine.pk}/dag/?message=9">covered by sum_' in body


def test_search_reports_bad_input_on_the_page(user, compacted_by_engine):
    response = client_for(user).get(
        f"/conversations/{compacted_by_engine.pk}/search/", {"q": "(unclosed", "mode": "regex"}
    )
    assert response.status_code == 400
    assert b'id="grep-error"' in response.content


def test_search_of_another_users_conversation_is_404(other_user, compacted_by_engine):
    response = client_for(other_user).get(
        f"/conversations/{compacted_by_engine.pk}/search/", {"q": "x"}
    )
    assert response.status_code == 404


def test_expand_stops_at_the_token_cap_and_says_so(user, compacted_by_engine, settings):
    settings.LCM_MAX_EXPAND_TOKENS = 100
    leaf = Summary.objects.filter(conversation=compacted_by_engine, kind=SummaryKind.LEAF).first()
    sources = list(
        SummaryMessage.objects.filter(summary=leaf)
        .order_by("ordinal")
        .values_list("message__seq", "message__token_count")
    )
    fits, used = [], 0
    for seq, tokens in sources:
        if used + tokens > 100:
            break
        fits.append(seq)
        used += tokens
    assert len(fits) < len(sources)
    body = text_of(user, f"/conversations/{compacted_by_engine.pk}/summaries/{leaf.pk}/expand/")
    assert [int(s) for s in re.findall(r'<article [^>]*data-seq="(\d+)"', body)] == fits
    assert f"Cut at the expand token cap (100 tokens): {len(sources) - len(fits)} more item" in body


def test_a_summary_s_fidelity_and_dropped_handles_link_to_where_they_occur(user, small_chunks):
    from html import unescape

    from compaction.engine import compact_conversation
    from compaction.models import SummaryFidelity
    from tests.factories import ConversationFactory, append_messages

    def many_files(i: int) -> dict:  # more handles than a 120-token leaf can name
        paths = " ".join(f"services/unit_{i}_{k}/handler_{k}.py" for k in range(3))
        return {"role": "user", "content": f"Look at {paths} after build {1000 + i}."}

    conversation = ConversationFactory(owner=user, session_id="handles")
    append_messages(conversation, 60, payload=many_files)
    compact_conversation(conversation_id=conversation.pk, mode="full")
    row = SummaryFidelity.objects.filter(summary__conversation=conversation, summary__depth=0)
    row = row.exclude(dropped={}).first()
    assert row is not None
    client = client_for(user)
    body = client.get(f"/conversations/{conversation.pk}/summaries/{row.summary_id}/")
    body = body.content.decode()

    shown = re.findall(r'<dd class="fidelity"><strong>([0-9.]+)</strong>', body)
    assert shown == [f"{row.score:.2f}"]
    links = re.findall(r'<a href="(/conversations/\d+/search/\?[^"]+)"><code>', body)
    assert len(links) == sum(len(names) for names in row.dropped.values())
    found = client.get(unescape(links[0])).content.decode()
    assert "message #" in found  # the dropped handle occurs in the messages
    dag = client.get(f"/conversations/{conversation.pk}/dag/").content.decode()
    data = json.loads(re.search(r'id="dag-data"[^>]*>(.*?)</script>', dag, re.S).group(1))
    scores = {n["id"]: n["fidelity"] for n in data["nodes"]}
    assert scores[row.summary_id] == row.score
