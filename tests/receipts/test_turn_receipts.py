"""Receipts of the turn engine's calls (docs/receipts.md): every body the recording
upstreams received replays byte for byte; the receipt names the items and why."""

from __future__ import annotations

import pytest

from receipts.selectors import receipt_detail
from tests.factories import UserFactory
from tests.receipts.replays import assert_every_body_replays
from tests.support.fake_messages_api import anthropic_text_stream
from tests.support.fake_responses_api import FakeResponsesAPI, responses_text_stream
from turns import runner, services
from turns.branches import pin_add
from turns.models import Phase

PROMPT = "You are the release assistant of the billing team. " + " ".join(
    f"Rule {i}: answer about invoices with exact figures." for i in range(60)
)


@pytest.fixture(autouse=True)
def _setup(settings):
    settings.LCM_LIBRARIAN_MODEL = "offline"  # the fakes answer turns only
    settings.LCM_RECEIPT_PRICES = "claude-sonnet=3/15;gpt-5=1.25/10"
    runner._shutting_down.clear()
    yield
    runner._shutting_down.clear()


def _turns(strategy: str, model: str, upstream, answers: list[str], stream) -> None:
    session = services.session_create(
        owner=UserFactory(username=f"owner-{strategy}"),
        title="chat",
        system_prompt=PROMPT,
        context_strategy=strategy,
    )
    pin_add(branch=session.active_branch, text="The invoice currency is always EUR, never USD.")
    for i, answer in enumerate(answers):
        upstream.enqueue(stream(answer))
        session.refresh_from_db()
        turn = services.turn_accept(
            session=session,
            branch=session.active_branch,
            content=f"Question {i}: what is the invoice total for March of year {2020 + i}?",
            model=model,
        )
        assert runner.run_turn(turn_id=turn.id).phase == Phase.RESPONSE_FINALIZED


@pytest.mark.django_db(transaction=True)
def test_lcm_turns_on_the_anthropic_wire_replay_byte_for_byte(cached_anthropic):
    answers = [
        f"Answer {i}: the invoice total for March is {1000 + i} euros, as booked." for i in range(3)
    ]
    _turns("lcm", "sonnet", cached_anthropic, answers, anthropic_text_stream)
    receipts = assert_every_body_replays([r.raw for r in cached_anthropic.requests], site="turn")
    detail = receipt_detail(receipts[-1])
    reasons = [i["reason"] for i in detail["items"] if i["in_body"]]
    assert "input" in reasons and "tail" in reasons
    assert all(i["unchanged"] for i in detail["items"])
    # the earlier answers are stored items, referred to, not copied
    assert sum(1 for i in detail["items"] if i["kind"] == "message" and i["in_body"]) == 5
    assert detail["response"]["usage"]["cache_read_input_tokens"] is not None
    assert detail["response"]["cost_usd"] > 0
    assert (
        receipts[-1].cache_read_tokens
        == cached_anthropic.cache_reports[-1]["cache_read_input_tokens"]
    )


@pytest.mark.django_db(transaction=True)
def test_state_turns_on_the_responses_wire_replay_byte_for_byte(monkeypatch):
    with FakeResponsesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        _turns("state", "gpt", api, [f"Answer {i}." for i in range(3)], responses_text_stream)
        receipts = assert_every_body_replays([r.raw for r in api.requests], site="turn")
    detail = receipt_detail(receipts[-1])
    assert detail["items"][0]["kind"] == "state"
    assert detail["wire"] == "openai"
