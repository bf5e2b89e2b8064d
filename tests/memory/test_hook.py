"""Messages ingested through the API are indexed by a background job queued on commit."""

import pytest

from memory.models import Chunk, MessageIndexCursor


@pytest.mark.django_db(transaction=True)
def test_an_api_append_queues_indexing_that_chunks_the_messages(api, conversation, settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}  # run queued jobs inline
    response = api.post(
        f"/api/v1/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "The boiler is serviced in May."},
        format="json",
    )
    assert response.status_code == 201, response.content
    chunks = list(Chunk.objects.filter(conversation=conversation))
    assert [c.rendered_text for c in chunks] == ["The boiler is serviced in May."]
    assert MessageIndexCursor.objects.get(conversation=conversation).last_seq == 1


@pytest.mark.django_db(transaction=True)
def test_indexing_can_be_switched_off(api, conversation, settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    settings.LCM_MEMORY_INDEX_MESSAGES = False
    response = api.post(
        f"/api/v1/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "not indexed"},
        format="json",
    )
    assert response.status_code == 201
    assert Chunk.objects.count() == 0


def _queued_index_jobs() -> int:
    from django_q.models import OrmQ

    return sum(
        1 for queued in OrmQ.objects.all() if queued.func() == "memory.tasks.index_conversation"
    )


@pytest.mark.django_db(transaction=True)
def test_appends_before_the_job_starts_share_one_queued_job(api, conversation):
    from memory.tasks import index_conversation

    def append(text):
        response = api.post(
            f"/api/v1/conversations/{conversation.pk}/messages/",
            {"role": "user", "content": text},
            format="json",
        )
        assert response.status_code == 201, response.content

    for text in ("The boiler is serviced in May.", "The roof was fixed in June.", "Gutters: July."):
        append(text)
    assert _queued_index_jobs() == 1
    index_conversation(conversation.pk)  # the job starts: later appends need a new one
    assert MessageIndexCursor.objects.get(conversation=conversation).last_seq == 3
    append("The chimney is swept in August.")
    assert _queued_index_jobs() == 2


@pytest.mark.django_db(transaction=True)
def test_a_queued_job_presumed_lost_is_queued_again(api, conversation):
    from datetime import timedelta

    from django.utils import timezone

    response = api.post(
        f"/api/v1/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "first"},
        format="json",
    )
    assert response.status_code == 201
    MessageIndexCursor.objects.filter(conversation=conversation).update(
        queued_at=timezone.now() - timedelta(hours=1)
    )
    response = api.post(
        f"/api/v1/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "second"},
        format="json",
    )
    assert response.status_code == 201
    assert _queued_index_jobs() == 2
