"""django-q2 entry point: `retention.tasks.retention_job`, scheduled by
`manage.py lcm_retention schedule`. Each run archives at most LCM_RETENTION_BATCH_SEGMENTS
segments (bounded batches; the next run continues), brings the memory of archived content
to its policy (memory.archived_content_policy), removes orphan objects, and runs the
deletion policy only when a policy sets delete_after_days, and gives the freed pages back
to the file system (SQLite; retention/storage.py)."""

from __future__ import annotations

from django.conf import settings

from retention.services import (
    orphans_remove,
    retention_apply,
    retention_delete_due,
    retention_memory_apply,
    retention_plan,
    retention_space_reclaim,
)


def retention_job() -> dict:
    result = retention_apply(
        ranges=retention_plan(), max_segments=settings.LCM_RETENTION_BATCH_SEGMENTS
    )
    caught_up = retention_memory_apply().as_dict()  # see lcm_retention apply
    result.memory = {k: result.memory.get(k, 0) + v for k, v in caught_up.items()}
    result.orphans_removed = orphans_remove()
    result.deleted_conversations = retention_delete_due(via="retention_job")
    retention_space_reclaim(result=result)
    return result.as_dict()
