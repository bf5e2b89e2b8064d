"""Queueing the security app's background jobs (redactions, exports) for django-q2."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

JOB_TIMEOUT = 6 * 3600  # seconds a worker may spend on one job (a user-wide redaction)


def enqueue(task: str, job_id: str) -> None:
    """Queue `task(job_id)`; run it here at once when the queue is synchronous (tests)."""
    from django_q.tasks import async_task

    sync = bool(settings.Q_CLUSTER.get("sync", False))
    # Named: queued from inside the urgent cluster it would otherwise run there
    # (core/job_queues.py).
    queue = {} if sync else {"cluster": settings.LCM_QUEUE_NAME}
    with transaction.atomic():  # django-q's ORM broker: see compaction.services._enqueue
        async_task(task, job_id, sync=sync, timeout=JOB_TIMEOUT, **queue)
