"""Audit records of destructive actions, for any app to write.

The audit log itself (the `AuditEvent` table, append-only) belongs to the security app,
which sits above the apps whose actions it records; it registers its writer here in its
`AppConfig.ready()`. An app below it (integrity's repairs, for one) calls `audit_record`
inside its own transaction, so the record commits or rolls back with the action.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_writer: Callable[..., Any] | None = None


def register_audit_writer(writer: Callable[..., Any]) -> None:
    global _writer
    _writer = writer


def audit_record(
    *,
    action: str,
    via: str,
    actor=None,
    target_kind: str = "",
    target_id: str | int = "",
    request=None,
    details: dict[str, Any] | None = None,
) -> Any:
    """Append one audit row (`details`: ids and counts only, never content)."""
    if _writer is None:  # never skip an audit silently
        raise ImproperlyConfigured("no audit writer is registered: install the security app")
    return _writer(
        action=action,
        via=via,
        actor=actor,
        target_kind=target_kind,
        target_id=target_id,
        request=request,
        details=details,
    )
