"""The call timeline and the receipt page in a real headless Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.explorer.helpers import client_for
from tests.receipts.calls import offline_calls

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_timeline_chart_leads_to_a_receipt_and_its_diff(
    page, user, live_server, offline_engine, small_chunks
):
    small_chunks.LCM_FRESH_TAIL_COUNT = 2
    small_chunks.LCM_LEAF_MIN_FANOUT = 2
    conversation_id, receipts = offline_calls(user)
    client = client_for(user)
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    page.goto(f"/conversations/{conversation_id}/")
    page.click("#tab-calls")
    expect(page.locator("#call-chart g.col")).to_have_count(len(receipts))
    expect(page.locator("#call-table tr.call")).to_have_count(len(receipts))
    box = page.locator("#call-chart").bounding_box()
    assert box["width"] > 600 and box["height"] > 150
    bars = page.locator("#call-chart rect.tok-uncached")
    heights = [float(bars.nth(i).get_attribute("height")) for i in range(len(receipts))]
    assert all(h > 0 for h in heights)
    page.locator("#call-table tr.call").nth(3).locator("a").first.click()
    expect(page.locator("#receipt-id")).to_have_text(receipts[3].id)
    expect(page.locator("#receipt-items tr.item.reason-summary")).to_have_count(1)
    expect(page.locator("#cache-break")).to_contain_text("The cached prefix changed at byte")
    expect(page.locator(".summarized")).to_contain_text("replaced by sum_")
    assert page.console_errors == []  # the pages (a raw JSON body asks for a favicon after)
    with page.expect_response(lambda r: "/request/" in r.url) as answer:
        page.click("#replay-link")
    assert answer.value.headers["x-lcm-replay-exact"] == "true"
    assert len(answer.value.body()) == receipts[3].body_bytes
