"""The admin: every model's changelist loads with data; canonical rows (messages, parts,
summaries, lineage, context items, large files) cannot be added, changed or deleted
there; changelists stay cheap on big tables; list filters work."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import (
    ContextItem,
    Conversation,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from largefiles.models import LargeFile
from tests.factories import ConversationFactory, UserFactory, append_messages

CANONICAL = [Message, MessagePart, Summary, SummaryMessage, SummaryParent, ContextItem, LargeFile]
ALL_MODELS = [Conversation, *CANONICAL]


@pytest.fixture
def superuser(db):
    return UserFactory(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def browser(superuser) -> Client:
    client = Client()
    client.force_login(superuser)
    return client


@pytest.fixture
def data(db):
    """One row (at least) in every table, written the way the product writes them."""
    conversation = ConversationFactory(owner=UserFactory(username="alice"), session_id="admin-s")
    messages = append_messages(conversation, 6)
    now = timezone.now()
    summaries = {}
    for suffix, kind, depth in (("l1", "leaf", 0), ("l2", "leaf", 0), ("c1", "condensed", 1)):
        summaries[suffix] = Summary.objects.create(
            id=f"sum_{suffix:0>16}",
            conversation=conversation,
            kind=kind,
            depth=depth,
            content=f"summary {suffix}",
            token_count=9,
            earliest_at=now - timedelta(minutes=1),
            latest_at=now,
            created_at=now,
        )
    SummaryMessage.objects.create(
        summary=summaries["l1"], message=messages[0], conversation=conversation, ordinal=0
    )
    for ordinal, source in enumerate(("l1", "l2")):
        SummaryParent.objects.create(
            summary=summaries["c1"],
            parent_summary=summaries[source],
            conversation=conversation,
            ordinal=ordinal,
        )
    ContextItem.objects.create(
        conversation=conversation,
        ordinal=100,
        item_type="summary",
        summary=summaries["c1"],
        token_count=9,
    )
    LargeFile.objects.create(
        id="file_0123456789abcdef",
        conversation=conversation,
        file_name="dump.csv",
        mime_type="text/csv",
        byte_size=123456,
        sha256="a" * 64,
        storage_key="ab/cd/file_0123456789abcdef",
    )
    return {"conversation": conversation, "messages": messages, "summaries": summaries}


def _changelist(model) -> str:
    return f"/admin/{model._meta.app_label}/{model._meta.model_name}/"


def _object_pk(model, data):
    if model is Conversation:
        return data["conversation"].pk
    if model is Summary:
        return data["summaries"]["c1"].pk
    return model.objects.order_by("pk").values_list("pk", flat=True).first()


def _counts() -> list[int]:
    return [model.objects.count() for model in ALL_MODELS]


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_every_changelist_loads_with_data(browser, data, model):
    response = browser.get(_changelist(model))
    assert response.status_code == 200
    rows = response.context["cl"].result_list
    assert len(rows) == model.objects.count() > 0


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_every_change_page_loads(browser, data, model):
    pk = _object_pk(model, data)
    response = browser.get(f"{_changelist(model)}{pk}/change/")
    assert response.status_code == 200


@pytest.mark.parametrize("model", CANONICAL, ids=lambda m: m.__name__)
def test_canonical_rows_cannot_be_added_in_the_admin(browser, data, model):
    before = _counts()
    assert browser.get(f"{_changelist(model)}add/").status_code == 403
    assert browser.post(f"{_changelist(model)}add/", {"content": "x"}).status_code == 403
    assert _counts() == before


@pytest.mark.parametrize("model", CANONICAL, ids=lambda m: m.__name__)
def test_canonical_rows_are_shown_without_a_save_button(browser, data, model):
    pk = _object_pk(model, data)
    page = browser.get(f"{_changelist(model)}{pk}/change/").content.decode()
    assert 'name="_save"' not in page
    assert 'name="_continue"' not in page
    assert "deletelink" not in page


@pytest.mark.parametrize("model", CANONICAL, ids=lambda m: m.__name__)
def test_a_forged_change_post_is_refused_and_changes_nothing(browser, data, model):
    pk = _object_pk(model, data)
    row = model.objects.get(pk=pk)
    before = {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields}
    response = browser.post(
        f"{_changelist(model)}{pk}/change/",
        {"content": "rewritten", "role": "system", "token_count": "1", "ordinal": "99"},
    )
    assert response.status_code == 403
    row.refresh_from_db()
    assert {f.attname: getattr(row, f.attname) for f in model._meta.concrete_fields} == before


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_no_row_can_be_deleted_in_the_admin(browser, data, model):
    pk = _object_pk(model, data)
    before = _counts()
    assert browser.get(f"{_changelist(model)}{pk}/delete/").status_code == 403
    assert browser.post(f"{_changelist(model)}{pk}/delete/", {"post": "yes"}).status_code == 403
    response = browser.post(
        _changelist(model), {"action": "delete_selected", "_selected_action": [pk], "post": "yes"}
    )
    assert response.status_code in (200, 302)
    assert _counts() == before


def test_conversation_counters_are_read_only(browser, data):
    conversation = data["conversation"]
    page = browser.get(f"/admin/conversations/conversation/{conversation.pk}/change/")
    form = page.context["adminform"].form
    assert "last_seq" not in form.fields
    assert "last_context_ordinal" not in form.fields


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.__name__)
def test_no_changelist_asks_for_the_full_result_count(model):
    assert admin.site._registry[model].show_full_result_count is False


_UNFILTERED_COUNT = re.compile(r'SELECT COUNT\(\*\) AS "__count" FROM "conversations_\w+"\s*$')


@pytest.mark.parametrize(
    "model",
    [Message, MessagePart, ContextItem, SummaryMessage, SummaryParent],
    ids=lambda m: m.__name__,
)
def test_big_changelists_run_no_unfiltered_count(browser, data, model):
    with CaptureQueriesContext(connection) as queries:
        assert browser.get(_changelist(model)).status_code == 200
    counts = [q["sql"] for q in queries.captured_queries if _UNFILTERED_COUNT.search(q["sql"])]
    assert counts == []


def test_a_filtered_changelist_counts_only_the_filtered_rows_once(browser, data):
    with CaptureQueriesContext(connection) as queries:
        assert browser.get(_changelist(Message), {"role__exact": "user"}).status_code == 200
    counts = [q["sql"] for q in queries.captured_queries if "COUNT(*)" in q["sql"]]
    assert len(counts) == 1
    assert "WHERE" in counts[0]


def test_the_message_changelist_cost_does_not_grow_with_rows(browser, data):
    with CaptureQueriesContext(connection) as small:
        browser.get(_changelist(Message))
    append_messages(data["conversation"], 60, start=6)
    with CaptureQueriesContext(connection) as large:
        browser.get(_changelist(Message))
    assert len(large.captured_queries) == len(small.captured_queries)


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        (Message, {"role__exact": "user"}, lambda: Message.objects.filter(role="user")),
        (Message, {"role__exact": "tool"}, lambda: Message.objects.filter(role="tool")),
        (
            MessagePart,
            {"part_type__exact": "tool"},
            lambda: MessagePart.objects.filter(part_type="tool"),
        ),
        (
            MessagePart,
            {"part_type__exact": "text"},
            lambda: MessagePart.objects.filter(part_type="text"),
        ),
        (Summary, {"kind__exact": "leaf"}, lambda: Summary.objects.filter(kind="leaf")),
        (Summary, {"kind__exact": "condensed"}, lambda: Summary.objects.filter(kind="condensed")),
        (
            ContextItem,
            {"item_type__exact": "summary"},
            lambda: ContextItem.objects.filter(item_type="summary"),
        ),
    ],
)
def test_list_filters_show_only_matching_rows(browser, data, model, params, expected):
    response = browser.get(_changelist(model), params)
    assert response.status_code == 200
    shown = sorted(row.pk for row in response.context["cl"].result_list)
    wanted = sorted(expected().values_list("pk", flat=True))
    assert shown == wanted
    assert 0 < len(wanted) < model.objects.count()


def test_the_message_changelist_filters_by_conversation(browser, data):
    other = ConversationFactory(owner=UserFactory(username="bob"), session_id="other-s")
    append_messages(other, 2)
    response = browser.get(_changelist(Message), {"conversation__id__exact": other.pk})
    assert response.status_code == 200
    assert sorted(r.pk for r in response.context["cl"].result_list) == sorted(
        Message.objects.filter(conversation=other).values_list("pk", flat=True)
    )


@pytest.mark.parametrize(
    "model", [Message, Summary, ContextItem, LargeFile], ids=lambda m: m.__name__
)
def test_the_conversation_filter_shows_one_conversations_rows(browser, data, model):
    other = ConversationFactory(owner=UserFactory(username="bob"), session_id="other-s")
    append_messages(other, 2)
    wanted = data["conversation"]
    response = browser.get(_changelist(model), {"conversation": wanted.pk})
    assert response.status_code == 200
    shown = sorted(str(r.pk) for r in response.context["cl"].result_list)
    assert shown == sorted(
        str(pk) for pk in model.objects.filter(conversation=wanted).values_list("pk", flat=True)
    )
    assert shown


def test_a_non_staff_user_cannot_open_the_admin(data, user):
    client = Client()
    client.force_login(user)
    response = client.get(_changelist(Message))
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def _conversation_form(owner, **fields) -> dict:
    return {"owner": owner.pk, "session_id": "new-s", "title": "", "token_budget": "1000", **fields}


def test_a_conversation_can_be_added_in_the_admin(browser, data):
    owner = data["conversation"].owner
    response = browser.post("/admin/conversations/conversation/add/", _conversation_form(owner))
    assert response.status_code == 302
    assert Conversation.objects.get(session_id="new-s").token_budget == 1000


@pytest.mark.parametrize(
    "fields",
    [{"token_budget": "0"}, {"token_budget": "-5"}, {"session_id": "admin-s"}],
    ids=["zero budget", "negative budget", "session id taken"],
)
def test_a_bad_conversation_in_the_admin_is_a_form_error_not_a_500(browser, data, fields):
    owner = data["conversation"].owner
    before = Conversation.objects.count()
    response = browser.post(
        "/admin/conversations/conversation/add/", _conversation_form(owner, **fields)
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert Conversation.objects.count() == before
