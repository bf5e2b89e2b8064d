"""The long-session acceptance at test scale (the 1,000-turn run is `lcm_bench --only
turns_long_session`): no head corruption, no pinned fact lost, the context bounded."""

from __future__ import annotations

from benchmarks.longrun import long_session


def test_a_long_session_keeps_its_head_and_pins(user, settings):
    settings.LCM_STATE_TARGET_TOKENS = 400
    report = long_session(owner=user, turns=60, pin_every=10)
    assert report.problems == []
    assert (report.head_corruptions, report.pin_losses, report.failed_turns) == (0, 0, 0)
    assert report.turns == 60
    assert report.max_state_tokens <= 400 + 200  # summary target + the pins
    # bounded: system + pins + state + the turns since the last fold (at most the fold
    # budget) + one pending turn + the message, far under the limit
    assert 0 < report.max_context_tokens < 2500 + settings.LCM_STATE_FOLD_TOKENS
