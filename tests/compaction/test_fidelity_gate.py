"""The fidelity gate on model summaries, through the real `anthropic` SDK against the local
fake Messages API (tests/support/fake_messages_api.py): a lossy answer, a good one,
nonsense followed by a good retry, and a list of names that says nothing of what happened."""

from __future__ import annotations

import pytest

from compaction import escalation
from compaction.summarizers import AnthropicSummarizer, DeterministicSummarizer, SummaryRequest
from compaction.summarizers.fidelity import measure
from compaction.summarizers.handles import draw_handles
from compaction.summarizers.prompts import MUST_NAME_INSTRUCTION, MUST_SAY_INSTRUCTION
from core.token_estimate import estimate
from tests.compaction.helpers import span
from tests.support.fake_messages_api import message

EXPAND = "Expand for details about:"
TARGET = 160
LOSSY = "The user and the assistant talked about the cache for a while and changed some code."
GOOD = (
    "Asked:\n"
    '- "Make the cache expire after 300 seconds and keep at most 5 entries." (msg:1), pending\n'
    "Errors and outcomes:\n"
    "- python -m pytest failed with KeyError 'ttl': still open.\n"
    "Decided:\n"
    "- We'll use CacheStore.evict() instead of a timer.\n"
    "State: /repo/src/cache/store.py read; git commit and npm run build ran; see "
    "https://docs.python.org/3/library/functools.html."
)
# Every handle of the span, as a list: names, nothing said of them.
NAMES = (
    "Files: /repo/src/cache/store.py\nCommands: python -m pytest, git commit, npm run\n"
    "Errors: KeyError\nIdentifiers: CacheStore.evict()\n"
    "URLs: https://docs.python.org/3/library/functools.html\nUser numbers: 300, 5\n"
    "Decisions: We'll use CacheStore.evict() instead of a timer"
)


@pytest.fixture
def summarizer(fake_messages_api):
    made = AnthropicSummarizer(
        api_key="sk-test-key",
        base_url=fake_messages_api.base_url,
        model="claude-summary-test",
        timeout=5.0,
        max_retries=0,
        sleep=lambda seconds: None,
    )
    yield made
    made.close()


@pytest.fixture
def gate_on(settings):
    settings.LCM_SUMMARY_MIN_FIDELITY = 0.7
    settings.LCM_SUMMARY_MIN_RELATIONS = 0.5
    return settings


@pytest.fixture
def handles_gate_only(gate_on):
    gate_on.LCM_SUMMARY_MIN_RELATIONS = 0
    return gate_on


def summarize(summarizer, conversation) -> escalation.Outcome:
    sources = span()
    return escalation.summarize(
        summarizer=summarizer,
        sources=sources,
        source_tokens=sum(estimate(item.content) for item in sources) * 10,
        depth=0,
        target_tokens=TARGET,
        previous_context=None,
        conversation_id=conversation.pk,
        handles=draw_handles(sources),
    )


def test_a_good_summary_passes_the_gate_with_one_call(
    fake_messages_api, summarizer, gate_on, conversation
):
    fake_messages_api.enqueue(message(f"{GOOD}\n{EXPAND} tool outputs"))

    outcome = summarize(summarizer, conversation)

    assert outcome.path == "model"
    assert len(fake_messages_api.requests) == 1
    text = fake_messages_api.requests[0].body["messages"][0]["content"]
    assert "Errors and outcomes: each error by its key phrase and what fixed it" in text
    assert MUST_NAME_INSTRUCTION not in text and MUST_SAY_INSTRUCTION not in text


def test_a_lossy_summary_is_retried_then_gets_the_missing_handles_within_its_target(
    fake_messages_api, summarizer, handles_gate_only, conversation
):
    fake_messages_api.enqueue(message(f"{LOSSY}\n{EXPAND} tool outputs"))
    fake_messages_api.enqueue(message(f"{LOSSY} Nothing else happened.\n{EXPAND} tool outputs"))
    handles = draw_handles(span())
    deterministic = DeterministicSummarizer().summarize(
        SummaryRequest(
            sources=span(), depth=0, target_tokens=TARGET, level="normal", handles=handles
        )
    )

    outcome = summarize(summarizer, conversation)

    assert outcome.path == "model_appended"
    assert len(fake_messages_api.requests) == 2
    retry = fake_messages_api.requests[1].body["messages"][0]["content"]
    assert MUST_NAME_INSTRUCTION in retry and "store.py" in retry and "KeyError" in retry
    assert outcome.content.startswith(LOSSY)  # the model's prose stays
    assert outcome.content.splitlines()[-1] == f"{EXPAND} tool outputs"
    assert estimate(outcome.content) <= TARGET
    gated = measure(outcome.content, handles).score
    assert gated >= measure(deterministic.content, handles).score
    assert gated >= 0.7
    assert any(line.startswith("gate: fidelity") for line in outcome.attempts)


def test_nonsense_then_a_good_retry_keeps_the_retry(
    fake_messages_api, summarizer, gate_on, conversation
):
    fake_messages_api.enqueue(message("zxq vortl blee"))
    fake_messages_api.enqueue(message(f"{GOOD}\n{EXPAND} tool outputs"))

    outcome = summarize(summarizer, conversation)

    assert outcome.path == "model_retried"
    assert outcome.content.startswith("Asked:")


def test_appending_never_makes_a_long_summary_longer_than_its_target(
    fake_messages_api, summarizer, handles_gate_only, conversation
):
    long_lossy = " ".join([LOSSY] * 8)  # over the target, still under the level's cap
    assert TARGET < estimate(long_lossy) <= TARGET * 1.5
    fake_messages_api.enqueue(message(long_lossy))
    fake_messages_api.enqueue(message(long_lossy))

    outcome = summarize(summarizer, conversation)

    assert outcome.path == "model_appended"
    assert estimate(outcome.content) <= TARGET
    assert "store.py" in outcome.content


def test_a_list_of_names_is_asked_again_then_replaced_by_the_deterministic_summary(
    fake_messages_api, summarizer, gate_on, conversation
):
    fake_messages_api.enqueue(message(f"{NAMES}\n{EXPAND} tool outputs"))
    fake_messages_api.enqueue(message(f"{NAMES}\n{EXPAND} tool outputs"))
    deterministic = DeterministicSummarizer().summarize(
        SummaryRequest(
            sources=span(),
            depth=0,
            target_tokens=TARGET,
            level="normal",
            handles=draw_handles(span()),
        )
    )

    outcome = summarize(summarizer, conversation)

    assert measure(NAMES, draw_handles(span())).score >= 0.7  # the names alone would pass
    assert outcome.path == "model_replaced"
    assert outcome.content == deterministic.content.strip()
    assert len(fake_messages_api.requests) == 2
    retry = fake_messages_api.requests[1].body["messages"][0]["content"]
    assert MUST_SAY_INSTRUCTION in retry
    assert "error `KeyError: 'ttl'`: what fixed it, or that it is still open" in retry
    assert any(line.startswith("gate: still loses what happened") for line in outcome.attempts)


def test_the_gate_is_off_at_zero(fake_messages_api, summarizer, settings, conversation):
    settings.LCM_SUMMARY_MIN_FIDELITY = 0
    settings.LCM_SUMMARY_MIN_RELATIONS = 0
    fake_messages_api.enqueue(message(LOSSY))

    outcome = summarize(summarizer, conversation)

    assert outcome.path == "model"
    assert outcome.content.startswith(LOSSY)
    assert "Files:" not in outcome.content
    assert len(fake_messages_api.requests) == 1


def test_the_path_the_gate_took_is_recorded_on_the_summary(
    fake_messages_api, summarizer, handles_gate_only, conversation
):
    from compaction.engine import compact_conversation
    from compaction.models import SummaryFidelity
    from tests.factories import append_messages

    handles_gate_only.LCM_LEAF_CHUNK_TOKENS = 100_000  # one leaf pass
    handles_gate_only.LCM_LEAF_TARGET_TOKENS = 120
    handles_gate_only.LCM_AUTOCOMPACT_DISABLED = True
    append_messages(conversation, 30)
    fake_messages_api.enqueue(message(f"{LOSSY}\n{EXPAND} tool outputs"))
    fake_messages_api.enqueue(message(f"{LOSSY}\n{EXPAND} tool outputs"))

    result = compact_conversation(conversation_id=conversation.pk, summarizer=summarizer)

    assert result.status == "compacted", result.detail
    [row] = SummaryFidelity.objects.filter(summary_id__in=result.summaries_created)
    assert row.path == "model_appended"
    assert row.score >= 0.7
    assert row.summary.token_count <= 120
