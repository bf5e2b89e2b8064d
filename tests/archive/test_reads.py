"""Archived content reads back through the same calls: expand (a summary over archived
leaves), the messages API, the explorer, export; each says it came from the archive."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from archive.selectors import forget
from archive.services import segment_archive
from conversations.models import Message
from importers.exporters import export_anthropic, export_jsonl, export_openai
from retrieval.selectors import expand_for_user


def _archive_leaves(compacted):
    conversation, dag = compacted
    return segment_archive(conversation=conversation, seq_from=1, seq_to=40).segment


def test_expand_of_a_summary_over_archived_leaves_reads_them_back(compacted, user):
    conversation, dag = compacted
    [top] = dag.top
    before = expand_for_user(
        user=user, summary_id=top.pk, depth=5, include_messages=True, token_cap=1_000_000
    )
    _archive_leaves(compacted)
    forget()

    after = expand_for_user(
        user=user, summary_id=top.pk, depth=5, include_messages=True, token_cap=1_000_000
    )

    assert len(after.messages) == len(before.messages) == 40
    assert [m["content"] for m in after.messages] == [m["content"] for m in before.messages]
    assert {m["from_archive"] for m in before.messages} == {False}
    assert {m["from_archive"] for m in after.messages} == {True}
    assert after.summaries == before.summaries


def test_a_warm_expand_reads_no_segment_row(compacted, user):
    conversation, dag = compacted
    _archive_leaves(compacted)
    leaf = dag.leaves[0]
    expand_for_user(user=user, summary_id=leaf.pk, depth=1, include_messages=True,
                    token_cap=100_000)  # fmt: skip
    with CaptureQueriesContext(connection) as queries:
        warm = expand_for_user(user=user, summary_id=leaf.pk, depth=1, include_messages=True,
                               token_cap=100_000)  # fmt: skip
    assert not any("archive_segment" in q["sql"] for q in queries.captured_queries)
    assert all(m["from_archive"] for m in warm.messages) and len(warm.messages) == 10


def test_the_messages_api_returns_archived_content_marked(compacted, api):
    conversation, _ = compacted
    url = f"/api/v1/conversations/{conversation.pk}/messages/?limit=100"
    before = api.get(url).json()["results"]
    _archive_leaves(compacted)
    forget()

    after = api.get(url).json()["results"]

    assert [m.pop("from_archive") for m in after] == [True] * 40 + [False] * 8
    assert {m.pop("from_archive") for m in before} == {False}
    assert after == before


def test_export_is_identical_before_and_after_archiving(compacted):
    conversation, _ = compacted
    exports = (export_anthropic, export_openai, lambda c: list(export_jsonl(c)))
    before = [export(conversation) for export in exports]
    _archive_leaves(compacted)
    forget()

    after = [export(conversation) for export in exports]

    assert Message.objects.filter(archived_in__isnull=False).count() == 40
    assert after == before


def test_the_explorer_timeline_shows_archived_content_marked(compacted, client, user):
    conversation, _ = compacted
    # What the page shows of seq 1-3: a user message's content, an assistant's text part,
    # a tool message's output part.
    first = list(Message.objects.filter(conversation=conversation, seq__lte=3).order_by("seq"))
    texts = [
        first[0].content,
        first[1].parts.get(part_type="text").text_content,
        first[2].parts.get().tool_output,
    ]
    _archive_leaves(compacted)
    forget()
    client.force_login(user)

    page = client.get(f"/conversations/{conversation.pk}/")

    body = page.content.decode()
    assert page.status_code == 200
    for text in texts:
        assert text in body
    assert body.count('class="chip from-archive"') == 40


def test_the_expand_tool_used_by_models_and_mcp_reads_archived_leaves(compacted, user):
    import json

    from retrieval.tools import tool_call_for_user

    conversation, dag = compacted
    leaf = dag.leaves[0]
    ask = {"summary_id": leaf.pk, "include_messages": True}
    before = json.loads(tool_call_for_user(user=user, name="lcm_expand", input=ask,
                                           conversation_id=conversation.pk).content)  # fmt: skip
    _archive_leaves(compacted)
    forget()

    after = json.loads(tool_call_for_user(user=user, name="lcm_expand", input=ask,
                                          conversation_id=conversation.pk).content)  # fmt: skip

    assert [m["content"] for m in after["messages"]] == [m["content"] for m in before["messages"]]
    assert len(after["messages"]) == 10
    assert {m["from_archive"] for m in after["messages"]} == {True}
