"""The summary DAG page in a real Chromium: it opens fitted to the view (every node
visible, as "Fit all" gives), stays fitted while the page settles (a resize), and keeps
the user's zoom once they have moved the view."""

from __future__ import annotations

import pytest

from conversations.models import Summary
from tests.explorer.helpers import compact
from tests.explorer.test_browser import sign_in
from tests.factories import ConversationFactory, append_messages

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEW = """(() => {
  const cy = window.lcmCy, box = cy.elements().renderedBoundingBox();
  return {zoom: cy.zoom(), pan: cy.pan(), w: cy.width(), h: cy.height(),
          x1: box.x1, y1: box.y1, x2: box.x2, y2: box.y2};
})()"""


def _fitted(view: dict) -> bool:
    """Every node inside the drawing area, and the graph filling one of its dimensions."""
    inside = view["x1"] >= -1 and view["y1"] >= -1 and view["x2"] <= view["w"] + 1
    inside = inside and view["y2"] <= view["h"] + 1
    fills = max((view["x2"] - view["x1"]) / view["w"], (view["y2"] - view["y1"]) / view["h"])
    return inside and fills > 0.85


def test_the_dag_opens_fitted_and_keeps_the_users_zoom(page, user, live_server, small_chunks):
    conversation = ConversationFactory(owner=user, session_id="dag-fit")
    append_messages(conversation, 400)
    compact(conversation)
    assert Summary.objects.filter(conversation=conversation).count() > 20
    sign_in(page, user, live_server)
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(f"/conversations/{conversation.pk}/")
    page.click("#tab-dag")
    page.wait_for_selector("body[data-dag-ready=true]")
    page.wait_for_timeout(300)
    opened = page.evaluate(VIEW)
    assert _fitted(opened), opened

    # The page settles (a narrower window): still fitted, the user has not moved.
    page.set_viewport_size({"width": 800, "height": 700})
    page.wait_for_timeout(300)
    settled = page.evaluate(VIEW)
    assert settled["w"] < opened["w"]
    assert _fitted(settled), settled

    # The user zooms in with the wheel: the zoom is theirs from now on.
    box = page.locator("#dag").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for _ in range(10):
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(50)
    page.wait_for_timeout(300)
    zoomed = page.evaluate(VIEW)
    assert zoomed["zoom"] > settled["zoom"] * 1.05
    assert page.evaluate("window.lcmDagView.userMoved()") is True
    page.set_viewport_size({"width": 1000, "height": 750})
    page.wait_for_timeout(300)
    kept = page.evaluate(VIEW)
    assert kept["zoom"] == pytest.approx(zoomed["zoom"])
    assert not _fitted(kept)

    # "Fit all" brings the whole graph back.
    page.click("#dag-fit")
    assert _fitted(page.evaluate(VIEW))
