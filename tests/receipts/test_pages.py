"""The explorer's receipt pages, server-rendered (docs/receipts.md, "Where users look")."""

from __future__ import annotations

import pytest

from conversations.models import Message
from tests.explorer.helpers import client_for
from tests.receipts.calls import offline_calls

pytestmark = pytest.mark.django_db


@pytest.fixture
def calls(user, offline_engine, small_chunks):
    small_chunks.LCM_FRESH_TAIL_COUNT = 2
    small_chunks.LCM_LEAF_MIN_FANOUT = 2
    return offline_calls(user)


def test_the_timeline_draws_a_column_and_a_row_per_call(user, calls):
    conversation_id, receipts = calls
    page = client_for(user).get(f"/conversations/{conversation_id}/calls/").content.decode()
    assert page.count('<g class="col"') == len(receipts)
    assert page.count('<tr class="call"') == len(receipts)
    assert f"/conversations/{conversation_id}/calls/{receipts[-1].id}/" in page


def test_the_receipt_page_shows_items_why_and_the_diff(user, calls):
    conversation_id, receipts = calls
    page = client_for(user).get(f"/conversations/{conversation_id}/calls/{receipts[3].id}/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "summary standing for older messages: covers messages #" in text
    assert 'id="cache-break"' in text and "The cached prefix changed at byte" in text
    assert "replaced by <code>sum_" in text


def test_a_message_leads_to_the_calls_that_saw_it(user, calls):
    conversation_id, receipts = calls
    first = Message.objects.filter(conversation_id=conversation_id).order_by("seq").first()
    page = client_for(user).get(f"/conversations/{conversation_id}/seen/message/{first.seq}/")
    text = page.content.decode()
    # the first question was sent by every call before the compaction summarized it
    assert text.count('<tr class="call"') == 3


def test_another_users_pages_do_not_exist(other_user, calls):
    conversation_id, receipts = calls
    client = client_for(other_user)
    for url in (
        f"/conversations/{conversation_id}/calls/",
        f"/conversations/{conversation_id}/calls/{receipts[0].id}/",
        f"/conversations/{conversation_id}/seen/message/1/",
    ):
        assert client.get(url).status_code == 404, url


def test_what_the_model_saw_in_the_console_is_the_receipt(user, calls):
    from django.urls import reverse

    from turns.models import ProviderStep

    _conversation_id, receipts = calls
    step = ProviderStep.objects.select_related("turn").get(pk=receipts[-1].source.split(":", 1)[1])
    url = reverse("console:turn-context", args=[step.turn.session_id, step.turn_id])
    text = client_for(user).get(url).content.decode()
    assert f'data-receipt="{receipts[-1].id}"' in text
    assert text.count('class="receipt-item') == receipts[-1].item_count
    assert "summary standing for older messages" in text
