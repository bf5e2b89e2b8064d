"""The audit log: admin changes and integrity repairs are recorded; the admin shows the
log read-only."""

from __future__ import annotations

import pytest

from integrity.models import ScanMode
from integrity.services import integrity_scan, repair_plan_apply
from security.models import AuditEvent
from tests.factories import UserFactory
from tests.integrity.conftest import broken  # noqa: F401, F811
from tests.support.tokens import issue_token
from tokens.models import ApiToken

pytestmark = pytest.mark.django_db


def _admin_client(client):
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    return admin


def test_an_admin_deletion_is_audited_without_content(client, user):
    admin = _admin_client(client)
    issue_token(user)
    token = ApiToken.objects.get(user=user)
    response = client.post(f"/admin/tokens/apitoken/{token.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    event = AuditEvent.objects.get(action="admin_change")
    assert (event.via, event.actor_id, event.target_id, event.details) == (
        "admin",
        admin.pk,
        str(token.pk),
        {"flag": "deletion"},
    )


def test_the_audit_log_is_read_only_in_the_admin(client):
    _admin_client(client)
    AuditEvent.objects.create(action="export", via="api", target_kind="conversation")
    event = AuditEvent.objects.get()
    assert client.get("/admin/security/auditevent/").status_code == 200
    assert client.get("/admin/security/auditevent/add/").status_code == 403
    assert (
        client.post(f"/admin/security/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code
        == 403
    )
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_applying_an_integrity_repair_is_audited(broken, user):  # noqa: F811
    conversation, _ = broken
    report = integrity_scan(
        conversation_id=conversation.pk, mode=ScanMode.SCAN_AND_PLAN, trigger="api"
    )
    plan = report.plans.get()
    repair_plan_apply(plan_id=plan.pk, user=user)
    event = AuditEvent.objects.get(action="integrity_repair")
    assert (event.actor_id, event.target_kind, event.target_id) == (
        user.pk,
        "repair_plan",
        str(plan.pk),
    )
    assert event.details == {"conversation_id": conversation.pk, "actions": len(plan.actions)}
