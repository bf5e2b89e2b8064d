"""Writes of the security app: audit records."""

from __future__ import annotations

from typing import Any

from security.models import AuditEvent


def client_ip(request) -> str | None:
    """The peer address (a proxy in front sets REMOTE_ADDR through its own middleware)."""
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def audit_record(
    *,
    action: str,
    via: str,
    actor=None,
    target_kind: str = "",
    target_id: str | int = "",
    request=None,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one audit row. `details` must hold ids and counts only, never content."""
    user = actor if actor is not None else getattr(request, "user", None)
    authenticated = user is not None and getattr(user, "is_authenticated", False)
    return AuditEvent.objects.create(
        action=action,
        via=via,
        actor_id=user.pk if authenticated else None,
        actor_name=user.get_username() if authenticated else "",
        target_kind=target_kind,
        target_id=str(target_id),
        ip=client_ip(request),
        details=details or {},
    )
