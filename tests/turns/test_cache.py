"""Prompt caching through the turn engine (issue 20): the requests the real SDKs send to
local servers that keep the providers' caches and report usage from the prefixes they
received; the reports must equal the product's own prefix accounting."""

from __future__ import annotations

import anthropic
import pytest

from core.metrics import render
from providers.caching import (
    anthropic_accounting,
    anthropic_min_tokens,
    openai_accounting,
    prompt_cache_key,
)
from tests.factories import UserFactory
from tests.support.fake_messages_api import anthropic_text_stream
from tests.support.fake_responses_api import FakeResponsesAPI, responses_text_stream
from turns import runner, services
from turns.jobs import commit_pending
from turns.models import Phase, ProviderStep, UserTurn

# About 1,500 tokens of instructions: above the 1,024-token minimum cacheable prefix.
LONG_PROMPT = "You are the release assistant of the billing team. " + " ".join(
    f"Rule {i}: answer about invoices, tax tables and ledgers with exact figures."
    for i in range(120)
)


@pytest.fixture(autouse=True)
def _deterministic_librarian(settings):
    settings.LCM_LIBRARIAN_MODEL = "offline"  # the fakes answer turns only


@pytest.fixture(autouse=True)
def _runner_accepting():
    runner._shutting_down.clear()
    yield
    runner._shutting_down.clear()


@pytest.fixture
def cached_openai(monkeypatch):
    with FakeResponsesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        yield api


def _session(strategy: str, prompt: str = LONG_PROMPT):
    return services.session_create(
        owner=UserFactory(username=f"owner-{strategy}"),
        title="chat",
        system_prompt=prompt,
        context_strategy=strategy,
    )


def _run(session, model: str, text: str) -> UserTurn:
    session.refresh_from_db()
    turn = services.turn_accept(
        session=session, branch=session.active_branch, content=text, model=model
    )
    return runner.run_turn(turn_id=turn.id)


def _breakpoints(body: dict) -> int:
    blocks = list(body.get("tools") or [])
    system = body.get("system")
    blocks.extend(system if isinstance(system, list) else [])
    for message in body["messages"]:
        if isinstance(message["content"], list):
            blocks.extend(message["content"])
    return sum("cache_control" in b for b in blocks)


@pytest.mark.django_db(transaction=True)
def test_lcm_turns_read_the_previous_prefix_and_the_reports_match_the_accounting(
    cached_anthropic,
):
    chat = _session("lcm")
    answers = [f"Answer {i}: the invoice total for March is {1000 + i} euros." for i in range(5)]
    for i, answer in enumerate(answers):
        cached_anthropic.enqueue(anthropic_text_stream(answer))
        turn = _run(chat, "sonnet", f"Question {i}: what is the invoice total for March?")
        assert turn.phase == Phase.RESPONSE_FINALIZED
    bodies = [r.body for r in cached_anthropic.requests]
    reports = cached_anthropic.cache_reports
    assert len(bodies) == len(reports) == 5
    minimum = anthropic_min_tokens("claude-sonnet-5-5")
    previous = None
    for body, report in zip(bodies, reports, strict=True):
        expected = anthropic_accounting(previous, body, minimum=minimum)
        assert report == {
            "input_tokens": expected["uncached"],
            "cache_creation_input_tokens": expected["written"],
            "cache_read_input_tokens": expected["read"],
        }
        assert 1 <= _breakpoints(body) <= 4
        previous = body
    # the history goes as real messages: turn 5 sends 4 earlier exchanges, then the question
    last = bodies[-1]
    assert [m["role"] for m in last["messages"]] == ["user", "assistant"] * 4 + ["user"]
    assert last["messages"][1]["content"][0]["text"] == answers[0]
    assert "memory_artifact" not in str(last["messages"][:-1])
    # from the second turn on, everything but the new exchange is read from the cache
    assert reports[0]["cache_read_input_tokens"] == 0
    for before, report in zip(reports, reports[1:], strict=False):
        assert report["cache_read_input_tokens"] == (
            before["cache_read_input_tokens"] + before["cache_creation_input_tokens"]
        )
    # what the provider reported is on each step, summed on the turn
    turn = UserTurn.objects.order_by("-turn_seq").first()
    step = ProviderStep.objects.get(turn=turn)
    assert step.usage["cache_read_input_tokens"] == reports[-1]["cache_read_input_tokens"]
    assert (
        turn.telemetry["cache"]["cache_read_input_tokens"]
        == (reports[-1]["cache_read_input_tokens"])
    )
    assert (
        turn.telemetry["cache"]["cache_creation_input_tokens"]
        == (reports[-1]["cache_creation_input_tokens"])
    )
    assert 'lcm_provider_cache_tokens_total{provider="anthropic",model="sonnet",kind="read"}' in (
        render()
    )


@pytest.mark.django_db(transaction=True)
def test_state_turns_cache_the_instructions_and_the_turns_since_the_fold(cached_anthropic):
    chat = _session("state")
    for i in range(3):
        cached_anthropic.enqueue(anthropic_text_stream(f"Answer {i}."))
        _run(chat, "sonnet", f"Question {i}")
        commit_pending(branch=chat.active_branch)
    bodies = [r.body for r in cached_anthropic.requests]
    reports = cached_anthropic.cache_reports
    system = bodies[-1]["system"]
    assert system == [
        {"type": "text", "text": system[0]["text"], "cache_control": {"type": "ephemeral"}}
    ]
    assert system[0]["text"].startswith("You are the release assistant")
    # no fold yet (turns/state_fold.py): the committed turns go verbatim, the current
    # message marked (its bytes repeat in the next request, issue 46), so each request
    # reads everything the previous one cached
    last = bodies[-1]["messages"]
    assert [m["role"] for m in last] == ["user", "assistant"] * 2 + ["user"]
    assert "memory_artifact" not in str(last)
    assert "cache_control" in last[-1]["content"][-1]
    assert reports[1]["cache_read_input_tokens"] == reports[0]["cache_creation_input_tokens"]
    assert reports[2]["cache_read_input_tokens"] == (
        reports[1]["cache_read_input_tokens"] + reports[1]["cache_creation_input_tokens"]
    )
    previous = None
    for body, report in zip(bodies, reports, strict=True):
        expected = anthropic_accounting(previous, body, minimum=1024)
        assert report["cache_read_input_tokens"] == expected["read"]
        assert report["cache_creation_input_tokens"] == expected["written"]
        previous = body


@pytest.mark.django_db(transaction=True)
def test_a_short_prompt_gets_no_breakpoint_and_nothing_is_cached(cached_anthropic):
    chat = _session("lcm", prompt="Be brief.")
    cached_anthropic.enqueue(anthropic_text_stream("one"), anthropic_text_stream("two"))
    _run(chat, "sonnet", "first")
    _run(chat, "sonnet", "second")
    assert [_breakpoints(r.body) for r in cached_anthropic.requests] == [0, 0]
    assert [r["cache_read_input_tokens"] for r in cached_anthropic.cache_reports] == [0, 0]
    assert [r["cache_creation_input_tokens"] for r in cached_anthropic.cache_reports] == [0, 0]


@pytest.mark.django_db(transaction=True)
def test_cache_off_sends_no_marker(cached_anthropic, monkeypatch):
    monkeypatch.setenv("LCM_MODEL_SONNET_CACHE", "off")
    chat = _session("lcm")
    cached_anthropic.enqueue(anthropic_text_stream("one"), anthropic_text_stream("two"))
    _run(chat, "sonnet", "first")
    _run(chat, "sonnet", "second")
    assert [_breakpoints(r.body) for r in cached_anthropic.requests] == [0, 0]
    assert isinstance(cached_anthropic.requests[0].body["system"], str)
    assert cached_anthropic.cache_reports[1]["cache_read_input_tokens"] == 0


@pytest.mark.django_db(transaction=True)
def test_openai_turns_carry_the_branch_cache_key_and_read_cached_tokens(cached_openai):
    chat = _session("lcm")
    for i in range(4):
        cached_openai.enqueue(responses_text_stream(f"Answer {i}: {'figures ' * 40}"))
        _run(chat, "gpt", f"Question {i}")
    bodies = [r.body for r in cached_openai.requests]
    chat.refresh_from_db()
    assert {b["prompt_cache_key"] for b in bodies} == {prompt_cache_key(chat.active_branch_id)}
    previous = None
    for body, report in zip(bodies, cached_openai.cache_reports, strict=True):
        expected = openai_accounting(previous, body)
        assert report == {"input_tokens": expected["total"], "cached_tokens": expected["read"]}
        previous = body
    assert cached_openai.cache_reports[-1]["cached_tokens"] >= 1024
    turn = UserTurn.objects.order_by("-turn_seq").first()
    step = ProviderStep.objects.get(turn=turn)
    assert step.usage["cache_read_input_tokens"] == cached_openai.cache_reports[-1]["cached_tokens"]
    assert step.usage["cache_creation_input_tokens"] is None


def test_the_fake_refuses_a_fifth_breakpoint(cached_anthropic):
    client = anthropic.Anthropic(api_key="k", base_url=cached_anthropic.base_url, max_retries=0)
    marked = {"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model="claude-sonnet-5-5",
            max_tokens=10,
            system=[dict(marked) for _ in range(5)],
            messages=[{"role": "user", "content": "hi"}],
        )
    assert "A maximum of 4 blocks with cache_control" in str(caught.value)
    assert cached_anthropic.cache_reports == []
