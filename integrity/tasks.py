"""django-q2 entry points. Schedule with `manage.py lcm_integrity_schedule`."""

from __future__ import annotations

from integrity.models import ScanMode, Trigger
from integrity.services import integrity_scan


def integrity_job(conversation_id: int | None = None, mode: str = ScanMode.SCAN) -> dict:
    """The Integrity Worker job: {conversationId?, mode: scan | scan_and_plan}."""
    if mode not in ScanMode.values:
        raise ValueError(f"mode must be one of {', '.join(ScanMode.values)}")
    report = integrity_scan(conversation_id=conversation_id, mode=mode, trigger=Trigger.JOB)
    return {"report_id": report.pk, "total_problems": report.total_problems}
