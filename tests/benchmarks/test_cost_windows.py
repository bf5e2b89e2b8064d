"""The cost benchmark's window rows (issue 35) run turns through the turn engine and the
`anthropic` SDK against the fake upstream that replays the provider's cache rule: a short
run at a 16k window reads most of its input from the cache once the context is full."""

from __future__ import annotations

import pytest

from benchmarks.cost import _steady_read_share, _window_run
from turns import runner


def test_the_steady_share_is_read_over_all_input_of_the_last_two_thirds():
    reports = [
        {"input_tokens": 100, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
    ] * 3 + [
        {"input_tokens": 10, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 60},
    ] * 6
    share, mean, billed = _steady_read_share(reports)
    assert share == pytest.approx(0.6)
    assert mean == 100
    assert billed == round(10 + 0.1 * 60 + 1.25 * 30)


@pytest.mark.django_db(transaction=True)
def test_a_16k_window_lcm_session_reads_most_of_its_input_from_the_cache():
    runner._shutting_down.clear()
    row = _window_run(16_000, "lcm", 30)
    assert row.unit == "%"
    # 82.8% over 150 turns in the benchmark; 8% in issue 35, when the window slid every turn
    assert row.figure >= 50, row
