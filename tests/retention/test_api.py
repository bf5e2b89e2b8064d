"""The retention API: own policy, a conversation's policy, effective policy and ranges."""

from __future__ import annotations

from archive.services import segment_archive
from retention.models import RetentionPolicy
from security.models import AuditEvent


def test_a_user_sets_reads_and_removes_their_policy(api, user):
    assert api.get("/api/v1/retention/policy/").json()["policy"] is None

    response = api.put("/api/v1/retention/policy/", {"archive_after_days": 30}, format="json")

    assert response.status_code == 200
    assert response.json()["policy"] == {"archive_after_days": 30, "keep_newest_tokens": None,
                                         "delete_after_days": None, "archived_vectors": None,
                                         "archived_fulltext": None}  # fmt: skip
    assert response.json()["server"]["source"]["archive_after_days"] == "server"
    assert AuditEvent.objects.count() == 0
    api.put("/api/v1/retention/policy/", {"delete_after_days": 365}, format="json")
    assert RetentionPolicy.objects.get(user=user).archive_after_days == 30
    [event] = AuditEvent.objects.all()
    assert event.action == "retention.delete_policy_set"
    assert api.delete("/api/v1/retention/policy/").status_code == 204
    assert not RetentionPolicy.objects.exists()


def test_bad_policy_input_is_a_400_and_stores_nothing(api):
    for body in ({"archive_after_days": -1}, {"keep_newest_tokens": "x"}, {"ttl": 3},
                 {"archived_vectors": "float8"}, {"archived_vectors": 16},
                 {"archived_fulltext": "shrink"}, {"archived_fulltext": ["drop"]}):  # fmt: skip
        response = api.put("/api/v1/retention/policy/", body, format="json")
        assert response.status_code == 400, body
        assert set(response.json()) == {"code", "message", "extra"}
    assert not RetentionPolicy.objects.exists()


def test_a_conversation_shows_its_policy_and_archived_ranges(compacted, api):
    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=40).segment
    url = f"/api/v1/conversations/{conversation.pk}/retention/"

    response = api.put(url, {"keep_newest_tokens": 2000}, format="json")

    body = response.json()
    assert response.status_code == 200
    assert body["policy"]["keep_newest_tokens"] == 2000
    assert body["effective"]["keep_newest_tokens"] == 2000
    assert body["effective"]["source"]["keep_newest_tokens"] == "conversation"
    assert body["archived_messages"] == 40
    [archived] = body["archived_ranges"]
    assert (archived["id"], archived["seq_from"], archived["seq_to"]) == (segment.pk, 1, 40)
    assert archived["stored_bytes"] == segment.stored_bytes


def test_another_users_conversation_is_a_404(compacted, other_api):
    conversation, _ = compacted
    url = f"/api/v1/conversations/{conversation.pk}/retention/"
    assert other_api.get(url).status_code == 404
    assert other_api.put(url, {"keep_newest_tokens": 1}, format="json").status_code == 404
    assert not RetentionPolicy.objects.exists()


def test_a_conversation_policy_sets_the_memory_of_archived_content(compacted, api, settings):
    conversation, _ = compacted
    settings.LCM_RETENTION_ARCHIVED_FULLTEXT = "drop"
    url = f"/api/v1/conversations/{conversation.pk}/retention/"

    response = api.put(url, {"archived_vectors": "int8"}, format="json")

    assert response.status_code == 200, response.content
    effective = response.json()["effective"]
    assert (effective["archived_vectors"], effective["archived_fulltext"]) == ("int8", "drop")
    assert effective["source"]["archived_vectors"] == "conversation"
    assert effective["source"]["archived_fulltext"] == "server"
    assert RetentionPolicy.objects.get(conversation=conversation).archived_vectors == "int8"
    response = api.put(url, {"archived_vectors": None}, format="json")
    assert response.json()["effective"]["archived_vectors"] == "keep"


def test_a_conversation_policy_can_move_the_units_text_to_the_archive(compacted, api):
    conversation, _ = compacted
    url = f"/api/v1/conversations/{conversation.pk}/retention/"

    response = api.put(url, {"archived_fulltext": "archive"}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["effective"]["archived_fulltext"] == "archive"
    assert RetentionPolicy.objects.get(conversation=conversation).archived_fulltext == "archive"
