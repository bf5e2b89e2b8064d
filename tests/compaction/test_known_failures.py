"""Each failure users reported in the TypeScript implementation, proven absent here."""

from __future__ import annotations

import pytest

from compaction.engine import compact_conversation
from compaction.summarizers import SummaryResult, render_sources
from conversations.models import ContextItem, Summary, SummaryMessage, SummaryParent
from tests.compaction.helpers import all_message_ids, messages_reachable_from_context
from tests.factories import append_messages


@pytest.fixture
def small_chunks(small_chunks):
    small_chunks.LCM_AUTOCOMPACT_DISABLED = True
    return small_chunks


class Echo:
    """A model that answers with its input: never shorter than the sources."""

    name = "echo"

    def summarize(self, request):
        return SummaryResult(content=render_sources(request), model="echo")


def test_compacted_sources_never_stay_in_the_context(conversation, small_chunks):
    append_messages(conversation, 300)

    compact_conversation(conversation_id=conversation.pk, mode="full")

    in_context_messages = set(
        ContextItem.objects.filter(conversation=conversation).values_list("message_id", flat=True)
    )
    in_context_summaries = set(
        ContextItem.objects.filter(conversation=conversation).values_list("summary_id", flat=True)
    )
    summarized = set(SummaryMessage.objects.values_list("message_id", flat=True))
    condensed_sources = set(SummaryParent.objects.values_list("parent_summary_id", flat=True))
    assert summarized and condensed_sources
    assert not in_context_messages & summarized
    assert not in_context_summaries & condensed_sources


def test_threshold_compaction_actually_triggers_and_runs(
    api, make_conversation, small_chunks, settings, django_capture_on_commit_callbacks
):
    settings.LCM_AUTOCOMPACT_DISABLED = False
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    conversation = make_conversation(token_budget=2000)

    with django_capture_on_commit_callbacks(execute=True):
        for start in range(0, 150, 10):
            append_messages(conversation, 10, start=start)

    tokens = sum(
        ContextItem.objects.filter(conversation=conversation).values_list("token_count", flat=True)
    )
    assert Summary.objects.filter(conversation=conversation).exists()
    assert tokens < 2000 * settings.LCM_CONTEXT_THRESHOLD


def test_a_model_that_cannot_shrink_is_replaced_by_a_real_compression(conversation, small_chunks):
    append_messages(conversation, 60)

    result = compact_conversation(
        conversation_id=conversation.pk, mode="incremental", summarizer=Echo()
    )

    summary = Summary.objects.get(pk=result.summaries_created[0])
    assert summary.level == "fallback"
    assert summary.token_count <= summary.source_token_count // 2
    sources_text = " ".join(
        m.content for m in [link.message for link in summary.message_links.order_by("ordinal")]
    )
    assert sources_text not in summary.content


def test_passes_that_cannot_save_tokens_stop_the_run_instead_of_looping(
    conversation, small_chunks, settings
):
    settings.LCM_FRESH_TAIL_COUNT = 0
    append_messages(conversation, 1, payload=lambda i: {"role": "assistant", "content": "ok"})
    append_messages(conversation, 1, payload=lambda i: {"role": "user", "content": "go"})

    result = compact_conversation(conversation_id=conversation.pk, mode="full", summarizer=Echo())

    assert result.status == "nothing_to_do"
    assert result.passes == 0
    assert "could not shrink" in result.detail
    assert not Summary.objects.exists()


def test_the_pass_bound_stops_a_long_sweep_and_says_so(conversation, small_chunks, settings):
    settings.LCM_COMPACTION_MAX_PASSES = 2
    append_messages(conversation, 300)

    result = compact_conversation(conversation_id=conversation.pk, mode="full")

    assert result.status == "compacted"
    assert result.passes == 2
    assert len(result.summaries_created) == 2
    assert "pass limit reached (2)" in result.detail


def test_success_is_never_reported_when_nothing_was_done(conversation, small_chunks):
    append_messages(conversation, 6)

    results = [
        compact_conversation(conversation_id=conversation.pk, mode=mode)
        for mode in ("incremental", "full", "until_under")
    ]

    assert [r.status for r in results] == ["nothing_to_do"] * 3
    assert all(r.summaries_created == [] and r.passes == 0 for r in results)
    assert all(r.tokens_before == r.tokens_after for r in results)


def test_the_fresh_tail_reaches_back_to_the_newest_user_message(
    conversation, small_chunks, settings
):
    settings.LCM_FRESH_TAIL_COUNT = 2
    append_messages(conversation, 60)
    user_turn = append_messages(
        conversation, 1, payload=lambda i: {"role": "user", "content": "now fix tests/a.py"}
    )[0]
    append_messages(
        conversation,
        20,
        start=100,
        payload=lambda i: {"role": "assistant", "content": f"step {i}: editing tests/a.py " * 5},
    )

    compact_conversation(conversation_id=conversation.pk, mode="full")

    raw = list(
        ContextItem.objects.filter(conversation=conversation, item_type="message")
        .order_by("ordinal")
        .values_list("message_id", flat=True)
    )
    assert raw[0] == user_turn.pk
    assert len(raw) == 21
    assert messages_reachable_from_context(conversation) == all_message_ids(conversation)


def test_file_ids_are_carried_onto_leaves_and_up_through_condensed_summaries(
    conversation, small_chunks
):
    def payload(i):
        text = f"turn {i}: see the stored file file_{i:016x} for the full log of the failing run"
        return {"role": "user" if i % 2 == 0 else "assistant", "content": text}

    append_messages(conversation, 120, payload=payload)

    compact_conversation(conversation_id=conversation.pk, mode="full")

    condensed = Summary.objects.filter(conversation=conversation, kind="condensed").first()
    assert condensed is not None
    expected = []
    for parent in Summary.objects.filter(
        pk__in=SummaryParent.objects.filter(summary=condensed)
        .order_by("ordinal")
        .values("parent_summary_id")
    ):
        messages = [link.message for link in parent.message_links.order_by("ordinal")]
        assert parent.file_ids == [f"file_{m.seq - 1:016x}" for m in messages]
    for link in SummaryParent.objects.filter(summary=condensed).order_by("ordinal"):
        expected.extend(link.parent_summary.file_ids)
    assert condensed.file_ids == expected


def test_an_append_while_the_model_is_called_succeeds_and_lands_after_the_summary(
    conversation, small_chunks
):
    """The summarizer appends through the real ingest service (a durable transaction): if
    the engine held a transaction across the model call, that append would raise."""
    from compaction.summarizers import DeterministicSummarizer

    class AppendingDuringCall:
        name = "deterministic"

        def __init__(self):
            self.appended = []

        def summarize(self, request):
            self.appended += append_messages(conversation, 1, start=1000)
            return DeterministicSummarizer().summarize(request)

    append_messages(conversation, 60)
    summarizer = AppendingDuringCall()

    result = compact_conversation(
        conversation_id=conversation.pk, mode="incremental", summarizer=summarizer
    )

    summary_ordinal = ContextItem.objects.get(summary_id=result.summaries_created[0]).ordinal
    appended_ordinals = list(
        ContextItem.objects.filter(message__in=summarizer.appended).values_list(
            "ordinal", flat=True
        )
    )
    assert len(appended_ordinals) == len(summarizer.appended) >= 1
    assert all(o > summary_ordinal for o in appended_ordinals)


def test_nothing_to_do_says_why(conversation, small_chunks):
    append_messages(conversation, 12)

    incremental = compact_conversation(conversation_id=conversation.pk, mode="incremental")
    under = compact_conversation(
        conversation_id=conversation.pk, mode="until_under", target_tokens=10**6
    )

    assert incremental.detail.startswith("nothing to do: ")
    assert "raw tokens outside the fresh tail, not over one leaf chunk (400)" in incremental.detail
    assert under.detail == (
        "nothing to do: the context is already at or under the target of 1000000 tokens"
    )


def test_the_time_bound_stops_a_slow_run_and_says_so(conversation, small_chunks, settings):
    import time

    from compaction.summarizers import DeterministicSummarizer

    class Slow:
        name = "deterministic"

        def summarize(self, request):
            time.sleep(0.6)
            return DeterministicSummarizer().summarize(request)

    settings.LCM_COMPACTION_MAX_SECONDS = 1
    append_messages(conversation, 300)

    result = compact_conversation(conversation_id=conversation.pk, mode="full", summarizer=Slow())

    assert result.status == "compacted"
    assert 1 <= result.passes <= 2  # a third pass could only start before 1 s had passed
    assert "time limit reached (1 s)" in result.detail


@pytest.mark.parametrize("max_depth, deepest", [(0, 0), (1, 1)])
def test_incremental_condenses_only_up_to_its_max_depth(
    conversation, small_chunks, settings, max_depth, deepest
):
    settings.LCM_INCREMENTAL_MAX_DEPTH = max_depth
    settings.LCM_LEAF_MIN_FANOUT = 2
    settings.LCM_CONDENSED_MIN_FANOUT = 2
    append_messages(conversation, 300)
    for _ in range(12):
        compact_conversation(conversation_id=conversation.pk, mode="incremental")

    depths = set(Summary.objects.filter(conversation=conversation).values_list("depth", flat=True))
    assert max(depths) == deepest
    assert Summary.objects.filter(conversation=conversation, depth=0).count() >= 4


def test_until_under_is_bounded_by_its_rounds_and_says_the_target_was_missed(
    conversation, small_chunks, settings
):
    settings.LCM_COMPACTION_MAX_ROUNDS = 1
    append_messages(conversation, 200)

    result = compact_conversation(
        conversation_id=conversation.pk, mode="until_under", target_tokens=1
    )

    assert result.status == "compacted"
    assert result.tokens_after > 1
    assert "target of 1 tokens not reached" in result.detail
