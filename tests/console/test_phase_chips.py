"""The chat console in a real Chromium: a turn's phase chip follows the phase (committed
by the librarian, then indexed) without a reload, as the header does."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.console.helpers import make_session
from tests.console.test_browser import sign_in
from turns.jobs import index_turn, summarize_turn
from turns.models import UserTurn

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_phase_chip_follows_the_turn_without_a_reload(page, user, live_server):
    session = make_session(user, title="Chips")
    sign_in(page, user, live_server)
    page.goto(f"/chat/{session.pk}/")
    expect(page.locator("#model")).to_have_attribute("data-loaded", "true")
    page.evaluate("window.__sameDocument = true")

    page.fill("#message", "Remember the blue notebook")
    page.keyboard.press("Control+Enter")
    article = page.locator("#transcript article.turn:not(.streaming)")
    expect(article).to_have_count(1)
    chip = article.locator(".chip.phase")
    expect(chip).to_have_text("response_finalized")
    turn = UserTurn.objects.get(session=session)

    # The turn's jobs run elsewhere (a worker): the librarian commits, then it is indexed.
    summarize_turn(turn_id=turn.pk)
    expect(chip).to_have_text("state_committed", timeout=10_000)
    expect(page.locator("#h-phase")).to_have_text("state_committed")
    expect(page.locator("#h-pending")).to_have_text("0")
    index_turn(turn_id=turn.pk)
    expect(chip).to_have_text("done", timeout=10_000)
    expect(page.locator("#h-phase")).to_have_text("done")
    expect(article).to_have_attribute("data-phase", "done")
    expect(article).to_have_class("turn phase-done")
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    assert page.console_errors == []
