"""Hard delete (SRD 14.4): everything of a conversation or session goes, nothing else
can delete canonical rows, the audit row keeps no content, integrity stays clean."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import Q

from conversations.inputs import parse_message
from conversations.models import (
    ContextItem,
    Conversation,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from conversations.services import messages_append
from integrity.checks import Scope
from integrity.report import scan
from largefiles.models import LargeFile
from largefiles.store import file_storage
from memory.indexing import index_turn
from memory.models import Chunk, ChunkVector
from security.models import AuditEvent
from tests.factories import ConversationFactory, append_messages
from tests.integrity import dag
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.turns.conftest import send
from turns import services as turn_services
from turns.events import events_path
from turns.journal import journal_path
from turns.models import Branch, ProviderStep, Session, StateCheckpoint, UserTurn

pytestmark = pytest.mark.usefixtures("large_file_storage", "offline_engine")

MARKER = "zanzibarquokka"
FILE_BODY = "".join(f"row {i}: {MARKER} ledger entry\n" for i in range(400))


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000


def _full_conversation(owner) -> Conversation:
    conversation = ConversationFactory(owner=owner)
    append_messages(conversation, 12)
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message({"role": "user", "content": f"please remember {MARKER}"}),
            parse_message(
                {
                    "role": "user",
                    "content": f'<file name="l.txt" mime="text/plain">{FILE_BODY}</file>',
                }
            ),
        ],
    )
    dag.compact(conversation)
    return conversation


def _rows_of(conversation_id: int) -> dict[str, int]:
    return {
        "messages": Message.objects.filter(conversation_id=conversation_id).count(),
        "parts": MessagePart.objects.filter(message__conversation_id=conversation_id).count(),
        "summaries": Summary.objects.filter(conversation_id=conversation_id).count(),
        "lineage": SummaryMessage.objects.filter(conversation_id=conversation_id).count()
        + SummaryParent.objects.filter(conversation_id=conversation_id).count(),
        "context": ContextItem.objects.filter(conversation_id=conversation_id).count(),
        "files": LargeFile.objects.filter(conversation_id=conversation_id).count(),
    }


def _search_hits(api, query: str) -> list:
    response = api.post("/api/v1/grep/", {"query": query, "scope": "both"}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_owner_hard_deletes_a_conversation_through_the_api(
    api, user, other_user, django_capture_on_commit_callbacks
):
    conversation = _full_conversation(user)
    keeper = _full_conversation(other_user)
    keeper_rows = _rows_of(keeper.pk)
    large_file = LargeFile.objects.get(conversation=conversation)
    summary_id = Summary.objects.filter(conversation=conversation).first().pk
    assert file_storage().exists(large_file.storage_key)
    assert _search_hits(api, MARKER)

    with django_capture_on_commit_callbacks(execute=True):
        response = api.delete(
            f"/api/v1/conversations/{conversation.pk}/?hard=true",
            {"confirm": str(conversation.pk)},
            format="json",
        )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["conversation_ids"] == [conversation.pk] and body["files"] == 1
    assert body["rows"]["conversations.Message"] == 14
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert set(_rows_of(conversation.pk).values()) == {0}
    assert not file_storage().exists(large_file.storage_key)
    assert _rows_of(keeper.pk) == keeper_rows  # another user's conversation is untouched
    # Nothing reachable: search, describe, expand, the detail endpoint, the explorer.
    assert _search_hits(api, MARKER) == []
    assert api.get(f"/api/v1/describe/{summary_id}/").status_code == 404
    assert api.get(f"/api/v1/conversations/{conversation.pk}/").status_code == 404
    assert api.post("/api/v1/expand/", {"summary_id": summary_id}, format="json").status_code in (
        400,
        404,
    )
    # Audited with ids and counts only.
    event = AuditEvent.objects.get(action="hard_delete")
    assert (event.via, event.target_kind, event.target_id, event.actor_id) == (
        "api",
        "conversation",
        str(conversation.pk),
        user.pk,
    )
    assert MARKER not in str(event.details) and "ledger" not in str(event.details)
    assert scan(Scope(None)).total_problems == 0


def test_full_text_search_rows_are_gone(user):
    conversation = _full_conversation(user)
    from security.hard_delete import hard_delete_conversation

    hard_delete_conversation(conversation=conversation, confirm=str(conversation.pk), via="test")
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT count(*) FROM conversations_message_fts WHERE conversations_message_fts "
                "MATCH %s",
                [MARKER],
            )
            assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT count(*) FROM conversations_message")
        assert cursor.fetchone()[0] == 0


def test_without_hard_or_confirmation_nothing_is_deleted(api, user):
    conversation = _full_conversation(user)
    before = _rows_of(conversation.pk)
    url = f"/api/v1/conversations/{conversation.pk}/"
    no_hard = api.delete(url, {"confirm": str(conversation.pk)}, format="json")
    assert (no_hard.status_code, no_hard.json()["code"]) == (400, "hard_required")
    # A well-formed confirmation of another id does not fit the target: 409 (the schema
    # can say "confirm is required", not "confirm equals the path id").
    wrong = api.delete(url + "?hard=true", {"confirm": "99999"}, format="json")
    assert (wrong.status_code, wrong.json()["code"]) == (409, "confirmation_mismatch")
    missing = api.delete(url + "?hard=true")
    assert (missing.status_code, missing.json()["code"]) == (400, "confirmation_required")
    assert _rows_of(conversation.pk) == before
    assert AuditEvent.objects.count() == 0


def test_another_user_gets_404_and_staff_may_delete(other_api, staff_api, user):
    conversation = _full_conversation(user)
    url = f"/api/v1/conversations/{conversation.pk}/?hard=true&confirm={conversation.pk}"
    assert other_api.delete(url).status_code == 404
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    assert staff_api.delete(url).status_code == 200
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_anonymous_gets_401(anon_api, user):
    conversation = _full_conversation(user)
    response = anon_api.delete(f"/api/v1/conversations/{conversation.pk}/?hard=true&confirm=1")
    assert response.status_code == 401
    assert Conversation.objects.filter(pk=conversation.pk).exists()


@pytest.mark.parametrize(
    "table",
    [
        "conversations_message",
        "conversations_messagepart",
        "conversations_summary",
        "conversations_summarymessage",
        "conversations_summaryparent",
        "conversations_conversation",
    ],
)
def test_the_database_refuses_any_other_delete(user, table):
    conversation = _full_conversation(user)
    column = {
        "conversations_messagepart": "message_id IN (SELECT id FROM conversations_message "
        "WHERE conversation_id = %s)",
        "conversations_conversation": "id = %s",
    }.get(table, "conversation_id = %s")
    with (
        pytest.raises(DatabaseError, match="never deleted"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(f"DELETE FROM {table} WHERE {column}", [conversation.pk])
    assert Message.objects.filter(conversation=conversation).count() == 14


def test_the_permit_ends_with_the_hard_delete_transaction(user):
    first, second = _full_conversation(user), _full_conversation(user)
    from security.hard_delete import hard_delete_conversation

    hard_delete_conversation(conversation=first, confirm=str(first.pk), via="test")
    with pytest.raises(DatabaseError, match="never deleted"), transaction.atomic():
        Message.objects.filter(conversation=second)._raw_delete(connection.alias)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM turns_delete_permit")
            assert cursor.fetchone()[0] == 0


def test_a_session_is_hard_deleted_with_its_branches_turns_chunks_and_journals(
    api, user, chat_with_history, django_capture_on_commit_callbacks
):
    chat, turns = chat_with_history
    conversation_ids = set(
        Branch.objects.filter(session=chat).values_list("conversation_id", flat=True)
    )
    step_ids = list(ProviderStep.objects.filter(turn__session=chat).values_list("pk", flat=True))
    for turn in turns:
        (events_path(turn.pk)).write_text('{"id":1,"event":"done","data":{}}\n')
    assert step_ids and all(journal_path(s).exists() for s in step_ids)
    assert Chunk.objects.filter(conversation_id__in=conversation_ids).exists()
    assert ChunkVector.objects.filter(chunk__conversation_id__in=conversation_ids).exists()

    # A branch's conversation alone cannot be deleted: the session must be.
    one = next(iter(conversation_ids))
    refused = api.delete(f"/api/v1/conversations/{one}/?hard=true&confirm={one}")
    assert (refused.status_code, refused.json()["code"]) == (409, "belongs_to_session")

    with django_capture_on_commit_callbacks(execute=True):
        response = api.delete(f"/api/v1/sessions/{chat.pk}/?hard=true&confirm={chat.pk}")
    assert response.status_code == 200, response.content
    assert not Session.objects.filter(pk=chat.pk).exists()
    for model in (Branch, StateCheckpoint, UserTurn, ProviderStep):
        assert not model.objects.exists(), model
    assert not Chunk.objects.exists() and not ChunkVector.objects.exists()
    assert not Conversation.objects.filter(pk__in=conversation_ids).exists()
    assert not any(journal_path(s).exists() for s in step_ids)
    assert not any(events_path(t.pk).exists() for t in turns)
    assert api.get(f"/api/v1/sessions/{chat.pk}/").status_code == 404
    semantic = api.post("/api/v1/grep/", {"query": "alpha", "mode": "hybrid"}, format="json")
    assert semantic.status_code == 200 and semantic.json()["results"] == []
    assert AuditEvent.objects.get(action="hard_delete").target_id == chat.pk
    assert scan(Scope(None)).total_problems == 0


def test_a_turn_row_outside_hard_delete_is_still_refused(user, chat_with_history):
    chat, turns = chat_with_history
    with pytest.raises(DatabaseError, match="never deleted"), transaction.atomic():
        UserTurn.objects.filter(pk=turns[0].pk)._raw_delete(connection.alias)
    assert UserTurn.objects.filter(Q(pk=turns[0].pk)).exists()


@pytest.fixture
def chat_with_history(user):
    chat = turn_services.session_create(owner=user, title="chat")
    turns = [send(chat, f"alpha topic {i} {MARKER}", commit=True) for i in range(3)]
    for turn in turns:
        index_turn(turn_id=turn.pk)
    return chat, turns


def test_the_command_deletes_and_audits(user, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    conversation = _full_conversation(user)
    with pytest.raises(CommandError, match="confirm"):
        call_command("lcm_hard_delete", conversation=conversation.pk, confirm="999999")
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    call_command("lcm_hard_delete", conversation=conversation.pk, confirm=str(conversation.pk))
    assert '"files": 1' in capsys.readouterr().out
    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    assert AuditEvent.objects.get().via == "command"
