"""Admin changes go to the audit log: every add, change or delete the admin site records
as a `LogEntry` becomes an `AuditEvent` (ids and the action only, not the changed values).
A signal here is deliberate: the admin site writes LogEntry itself, with no service call
of ours to hook into."""

from __future__ import annotations

from django.contrib.admin.models import LogEntry
from django.db.models.signals import post_save
from django.dispatch import receiver

from security.services import audit_record

_FLAGS = {1: "addition", 2: "change", 3: "deletion"}


@receiver(post_save, sender=LogEntry, dispatch_uid="security_audit_admin_change")
def audit_admin_change(sender, instance: LogEntry, created: bool, **kwargs) -> None:
    if not created:
        return
    audit_record(
        action="admin_change",
        via="admin",
        actor=instance.user,
        target_kind=instance.content_type.model if instance.content_type_id else "",
        target_id=instance.object_id or "",
        details={"flag": _FLAGS.get(instance.action_flag, str(instance.action_flag))},
    )
