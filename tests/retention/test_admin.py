"""The admin shows retention policies and archive segments (ranges, sizes); saving a policy
with a deletion age is audited."""

from __future__ import annotations

from django.test import Client

from archive.services import segment_archive
from retention.models import RetentionPolicy
from security.models import AuditEvent
from tests.factories import UserFactory


def _admin() -> Client:
    client = Client()
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


def test_the_admin_lists_segments_with_their_ranges_and_sizes(compacted):
    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=40).segment

    page = _admin().get("/admin/archive/segment/")

    body = page.content.decode()
    assert page.status_code == 200
    assert f">{segment.stored_bytes}<" in body and f">{segment.raw_bytes}<" in body
    assert f"{segment.raw_bytes / segment.stored_bytes:.1f}x" in body
    detail = _admin().get(f"/admin/archive/segment/{segment.pk}/change/")
    assert detail.status_code == 200 and segment.key in detail.content.decode()


def test_the_admin_saves_a_policy_and_audits_a_deletion_age(compacted, user):
    conversation, _ = compacted
    client = _admin()
    listing = client.get("/admin/retention/retentionpolicy/")
    assert listing.status_code == 200 and "server default" in listing.content.decode()

    saved = client.post(
        "/admin/retention/retentionpolicy/add/",
        {
            "user": user.pk,
            "conversation": "",
            "archive_after_days": "30",
            "keep_newest_tokens": "",
            "delete_after_days": "400",
            "archived_vectors": "float16",
            "archived_fulltext": "",
        },  # fmt: skip
    )

    assert saved.status_code == 302, saved.content.decode()[:2000]
    policy = RetentionPolicy.objects.get(user=user)
    assert (policy.archive_after_days, policy.keep_newest_tokens, policy.delete_after_days) == (
        30, None, 400)  # fmt: skip
    assert (policy.archived_vectors, policy.archived_fulltext) == ("float16", None)
    assert ">float16<" in client.get("/admin/retention/retentionpolicy/").content.decode()
    [event] = AuditEvent.objects.filter(action="retention.delete_policy_set")
    assert event.target_id == str(user.pk)
    refused = client.post(
        "/admin/retention/retentionpolicy/add/",
        {"user": user.pk, "conversation": conversation.pk, "archive_after_days": "1"},
    )
    assert refused.status_code == 200  # the form comes back with the error
    assert RetentionPolicy.objects.count() == 1
