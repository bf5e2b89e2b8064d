"""Drop-in threads are listed, read-only, in the admin."""

from __future__ import annotations

from conversations.services import conversation_create
from dropin.models import Thread
from tests.factories import UserFactory


def test_the_admin_lists_threads_read_only(client, db):
    owner = UserFactory(username="owner")
    conversation, _ = conversation_create(owner=owner, session_id="dropin:x")
    Thread.objects.create(
        owner=owner, conversation=conversation, key="my-key", model="local", head_hash="h"
    )
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    listing = client.get("/admin/dropin/thread/", HTTP_HOST="localhost")
    assert listing.status_code == 200
    assert b"my-key" in listing.content
    assert client.get("/admin/dropin/thread/add/", HTTP_HOST="localhost").status_code == 403
