"""The security jobs' reconciler: redactions and exports whose worker died, or whose queue
entry was lost, are handed out again; export archives whose time is up are deleted.

Idempotent and safe in several processes at once (claims are compare-and-set). It runs in
every worker process when it spawns and then every LCM_JOB_RECONCILE_SECONDS, and from a
django-q Schedule every minute as a fallback (core/periodic.py), like workers.reconcile.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from core import periodic
from security.export_store import expire_due
from security.models import ExportJob, ExportState, Redaction, RedactionState

logger = logging.getLogger("lcm.security")
UNPICKED_JOB_SECONDS = 30  # a pending job younger than this may simply be waiting
SCHEDULE_NAME = "lcm-security-reconcile"


def _stale(model, pending: str, running: str, now):
    return model.objects.filter(
        Q(state=pending, created_at__lt=now - timedelta(seconds=UNPICKED_JOB_SECONDS))
        & (Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        | Q(state=running, lease_until__lt=now)
    )


def reconcile_security_jobs(now=None) -> dict:
    from security.export_jobs import enqueue as enqueue_export
    from security.redaction.queue import enqueue as enqueue_redaction

    now = now or timezone.now()
    counts = {"redactions": 0, "exports": 0, "archives_expired": expire_due(now)}
    # A pending job's lease only spaces out re-dispatches; a running one whose lease
    # expired is back to pending (its steps resume from the first one not recorded).
    lease = now + timedelta(seconds=settings.LCM_JOB_LEASE_SECONDS)
    for model, pending, running, enqueue, key in (
        (Redaction, RedactionState.PENDING, RedactionState.RUNNING, enqueue_redaction,
         "redactions"),
        (ExportJob, ExportState.PENDING, ExportState.RUNNING, enqueue_export, "exports"),
    ):  # fmt: skip
        for pk in list(_stale(model, pending, running, now).values_list("pk", flat=True)[:100]):
            if (
                model.objects.filter(pk=pk)
                .filter(Q(state=pending) | Q(state=running, lease_until__lt=now))
                .update(state=pending, lease_until=lease)
            ):
                enqueue(pk)
                counts[key] += 1
    if any(counts.values()):
        logger.info("security job reconciler: %s", counts)
    return counts


def ensure_schedule(**kwargs) -> None:
    """post_migrate: the every-minute django-q Schedule (created once, idempotent)."""
    periodic.ensure_schedule(name=SCHEDULE_NAME, func="security.tasks.run_reconcile")


def install_worker_hooks() -> None:
    periodic.on_worker_spawn(
        name=SCHEDULE_NAME,
        work=reconcile_security_jobs,
        interval=lambda: float(settings.LCM_JOB_RECONCILE_SECONDS),
    )
