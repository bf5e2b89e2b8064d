"""Policies: server default, per user, per conversation; the plan; the command; deletion."""

from __future__ import annotations

import datetime as dt
import json
from io import StringIO

from django.core.management import call_command
from django.utils import timezone

from archive.models import Segment
from conversations.models import Conversation, Message
from retention.models import RetentionPolicy
from retention.policies import effective_policy, plan_conversation
from security.models import AuditEvent
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag


def _command(*args) -> dict:
    out = StringIO()
    call_command("lcm_retention", *args, "--json", stdout=out, stderr=StringIO())
    return json.loads(out.getvalue())


def test_the_effective_policy_layers_server_user_and_conversation(compacted, settings, user):
    conversation, _ = compacted
    settings.LCM_RETENTION_ARCHIVE_AFTER_DAYS = 30
    settings.LCM_RETENTION_KEEP_NEWEST_TOKENS = 5000
    assert effective_policy(conversation).as_dict() == {
        "archive_after_days": 30, "keep_newest_tokens": 5000, "delete_after_days": 0,
        "archived_vectors": "keep", "archived_fulltext": "keep",
        "source": dict.fromkeys(["archive_after_days", "keep_newest_tokens",
                                 "delete_after_days", "archived_vectors",
                                 "archived_fulltext"], "server"),
    }  # fmt: skip
    RetentionPolicy.objects.create(user=user, archive_after_days=7, keep_newest_tokens=100,
                                   archived_vectors="float16")  # fmt: skip
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=0,
                                   archived_vectors="int8", archived_fulltext="drop")  # fmt: skip

    policy = effective_policy(conversation)

    assert (policy.archive_after_days, policy.keep_newest_tokens, policy.delete_after_days) == (
        7, 0, 0)  # fmt: skip
    assert (policy.archived_vectors, policy.archived_fulltext) == ("int8", "drop")
    assert policy.source == {"archive_after_days": "user", "keep_newest_tokens": "conversation",
                             "delete_after_days": "server", "archived_vectors": "conversation",
                             "archived_fulltext": "conversation"}  # fmt: skip


def test_the_plan_archives_only_covered_messages_out_of_the_context(compacted):
    conversation, _ = compacted
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)

    ranges = plan_conversation(conversation, effective_policy(conversation))

    # 1-40 are covered by leaves and out of the context; 41-48 are the tail.
    assert [(r.seq_from, r.seq_to, r.messages) for r in ranges] == [(1, 40, 40)]


def test_the_plan_by_newest_tokens_keeps_the_newest(compacted):
    conversation, _ = compacted
    tokens = dict(
        Message.objects.filter(conversation=conversation).values_list("seq", "token_count")
    )
    # Keep the newest messages down to seq 31 (those above 30 sum to `keep`).
    keep = sum(t for s, t in tokens.items() if s > 30)
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=keep)

    [only] = plan_conversation(conversation, effective_policy(conversation))

    assert (only.seq_from, only.seq_to) == (1, 30)


def test_the_plan_by_age_and_segment_size(compacted, settings):
    conversation, _ = compacted
    settings.LCM_ARCHIVE_SEGMENT_MESSAGES = 15
    RetentionPolicy.objects.create(conversation=conversation, archive_after_days=1)
    policy = effective_policy(conversation)

    assert plan_conversation(conversation, policy) == []
    later = timezone.now() + dt.timedelta(days=2)
    assert [(r.seq_from, r.seq_to) for r in plan_conversation(conversation, policy, now=later)] == [
        (1, 15), (16, 30), (31, 40)]  # fmt: skip


def test_nothing_is_planned_by_default(compacted):
    conversation, _ = compacted
    assert _command("plan") == {"dry_run": True, "ranges": [], "messages": 0, "tokens": 0}


def test_the_command_plans_applies_reports_and_restores(compacted):
    conversation, _ = compacted
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)

    dry = _command("apply", "--dry-run")
    assert dry["messages"] == 40 and Segment.objects.count() == 0
    applied = _command("apply")
    assert (applied["segments"], applied["messages"], applied["conflicts"]) == (1, 40, 0)
    assert applied["memory"] == {"vectors_compressed": 0, "vectors_expanded": 0,
                                 "fulltext_dropped": 0, "fulltext_restored": 0,
                                 "text_archived": 0, "text_kept": 0,
                                 "text_restored": 0}  # fmt: skip
    status = _command("status")
    assert (status["memory_compressed_vectors"], status["memory_fulltext_dropped_chunks"]) == (0, 0)
    assert (status["messages"], status["archived_messages"], status["segments"]) == (48, 40, 1)
    assert 0 < status["archive_stored_bytes"] < status["archive_raw_bytes"]
    assert _command("apply")["messages"] == 0
    restored = _command("restore", "--conversation", str(conversation.pk))
    assert restored == {"restored_messages": 40}
    assert _command("status")["archived_messages"] == 0


def test_deletion_after_age_is_off_by_default_and_audited_when_on(user, conversation):
    old = Conversation.objects.create(owner=user, session_id="old", token_budget=1000)
    append_messages(old, 3)
    Conversation.objects.filter(pk=old.pk).update(updated_at=timezone.now() - dt.timedelta(days=90))

    assert _command("apply", "--delete")["deleted_conversations"] == []
    assert Conversation.objects.filter(pk=old.pk).exists()

    RetentionPolicy.objects.create(user=user, delete_after_days=30)
    # Without --delete, apply never deletes.
    assert _command("apply")["deleted_conversations"] == []
    result = _command("apply", "--delete")

    assert result["deleted_conversations"] == [old.pk]
    assert not Conversation.objects.filter(pk=old.pk).exists()
    assert not Message.objects.filter(conversation_id=old.pk).exists()
    assert Conversation.objects.filter(pk=conversation.pk).exists()  # not idle long enough
    assert AuditEvent.objects.filter(target_id=str(old.pk)).count() == 1


def test_a_deleted_conversation_takes_its_segments_along(user):
    doomed = Conversation.objects.create(owner=user, session_id="doomed", token_budget=100000)
    append_messages(doomed, 20)
    build_dag(doomed, leaf_size=5, fanout=3, max_depth=1, tail=5)
    RetentionPolicy.objects.create(conversation=doomed, keep_newest_tokens=1, delete_after_days=1)
    assert _command("apply")["messages"] == 15
    Conversation.objects.filter(pk=doomed.pk).update(
        updated_at=timezone.now() - dt.timedelta(days=5)
    )

    assert _command("apply", "--delete")["deleted_conversations"] == [doomed.pk]
    assert Segment.objects.count() == 0


def test_the_scheduled_job_archives_in_bounded_batches(compacted, settings):
    from retention.tasks import retention_job

    conversation, _ = compacted
    settings.LCM_RETENTION_BATCH_SEGMENTS = 2
    settings.LCM_ARCHIVE_SEGMENT_MESSAGES = 15
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)

    first, second, third = retention_job(), retention_job(), retention_job()

    assert [(r["segments"], r["messages"]) for r in (first, second, third)] == [
        (2, 30), (1, 10), (0, 0)]  # fmt: skip
    assert first["deleted_conversations"] == []
    assert Message.objects.filter(archived_in__isnull=False).count() == 40


def test_the_schedule_command_creates_one_schedule(db):
    from django_q.models import Schedule

    assert _command("schedule", "--minutes", "30") == {"scheduled": "lcm-retention", "minutes": 30}
    _command("schedule", "--minutes", "45")
    [schedule] = Schedule.objects.filter(name="lcm-retention")
    assert (schedule.func, schedule.minutes) == ("retention.tasks.retention_job", 45)
    assert _command("schedule", "--remove") == {"removed": True}
    assert not Schedule.objects.filter(name="lcm-retention").exists()
