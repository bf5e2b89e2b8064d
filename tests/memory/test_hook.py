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
