"""The two background queues (issue 46): the main one, and an urgent one for the jobs
the next turn's context waits on (compaction, a turn's state commit).

django-q2 has no task priorities, but it serves several queues in one site: a cluster
started with `Q_CLUSTER_NAME=<queue>` takes only that queue's tasks, and `async_task(...,
cluster=<queue>)` puts a task there. `manage.py qcluster` starts the urgent queue's
cluster beside its own (workers/management/commands/qcluster.py), so indexing a long
import never holds a compaction back. LCM_URGENT_WORKERS=0 puts everything on the main
queue (one cluster, as before).
"""

from __future__ import annotations

from django.conf import settings


def urgent_queue() -> str | None:
    """The urgent queue's name (the main queue's name plus "-urgent"), or None when it is
    off."""
    if settings.LCM_URGENT_WORKERS <= 0:
        return None
    return f"{settings.LCM_QUEUE_NAME}-urgent"


def enqueue(task: str, *args, urgent: bool = False) -> None:
    """Queue `task(*args)` on the main queue, or on the urgent one; run it at once when
    the cluster is configured synchronous (tests, `Q_CLUSTER["sync"]`)."""
    from django_q.tasks import async_task  # loads django_q's models: imported at the call

    # Read `sync` at call time (django-q reads Q_CLUSTER once, at import).
    if settings.Q_CLUSTER.get("sync", False):
        async_task(task, *args, sync=True)
        return
    # Always named: a task queued from inside the urgent cluster would otherwise go to that
    # cluster's own queue (django-q2's default is the running cluster's name).
    queue = (urgent_queue() if urgent else None) or settings.LCM_QUEUE_NAME
    async_task(task, *args, sync=False, cluster=queue)
