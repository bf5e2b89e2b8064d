"""Crash safety: a real `manage.py lcm_retention` process is SIGKILLed at each step of
archiving and restoring (archive/faults.py), on the test database (SQLite or PostgreSQL).
Whatever the step, every message's content is either still in the database or in a
verified segment that reads back identical; running the command again finishes the job."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys

import pytest

from archive import segments
from archive.models import Segment, SegmentState
from archive.selectors import forget
from conversations.archive_port import hydrate_messages
from conversations.models import Message
from retention.models import RetentionPolicy
from retention.services import orphan_objects, orphans_remove
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag
from tests.turns.live import ROOT, child_env

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def _run(tmp_path, conversation, action: str, crash_at: str | None = None):
    env = child_env(LCM_DATA_DIR=str(tmp_path))
    env.pop("LCM_ARCHIVE_CRASH_AT", None)
    if crash_at:
        env["LCM_ARCHIVE_CRASH_AT"] = crash_at
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "lcm_retention",
            action,
            "--conversation",
            str(conversation.pk),
            "--json",
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _read(conversation):
    forget()
    messages = hydrate_messages(
        Message.objects.filter(conversation=conversation).prefetch_related("parts").order_by("seq")
    )
    return [
        segments.canonical_form(m, sorted(m.parts.all(), key=lambda p: p.ordinal)) for m in messages
    ]


@pytest.fixture
def prepared(conversation, tmp_path, archive_folder, settings):
    """30 messages, three leaves of 8 out of the context (24 archivable), a 6-message tail;
    a policy that archives everything it may; the parent reads the child's segments."""
    settings.STORAGES["archive_segments"]["OPTIONS"]["location"] = str(tmp_path / "archive")
    append_messages(conversation, 30)
    build_dag(conversation, leaf_size=8, fanout=3, max_depth=1, tail=6)
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)
    return conversation, segments.forms_of(
        list(Message.objects.filter(conversation=conversation).order_by("seq"))
    )


@pytest.mark.parametrize("step", ["written", "verified", "cleared"])
def test_a_crash_before_the_commit_leaves_the_content_in_the_database(prepared, tmp_path, step):
    conversation, before = prepared

    crashed = _run(tmp_path, conversation, "apply", crash_at=step)

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert Segment.objects.count() == 0
    assert Message.objects.filter(archived_in__isnull=False).count() == 0
    assert (
        segments.forms_of(list(Message.objects.filter(conversation=conversation).order_by("seq")))
        == before
    )
    # The object written before the kill is an orphan no row names, removed once old.
    assert len(orphan_objects()) == 1
    assert orphans_remove(older_than=dt.timedelta(0)) == 1
    # Running again finishes the job.
    again = _run(tmp_path, conversation, "apply")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["messages"] == 24
    assert Message.objects.filter(archived_in__isnull=False).count() == 24
    assert _read(conversation) == before


def test_a_crash_after_the_commit_leaves_a_verified_segment(prepared, tmp_path):
    conversation, before = prepared

    crashed = _run(tmp_path, conversation, "apply", crash_at="committed")

    assert crashed.returncode == -signal.SIGKILL
    [segment] = Segment.objects.all()
    assert segment.state == SegmentState.ACTIVE
    assert Message.objects.filter(archived_in=segment.pk).count() == 24
    assert _read(conversation) == before
    again = _run(tmp_path, conversation, "apply")
    assert json.loads(again.stdout)["messages"] == 0
    assert Segment.objects.count() == 1


@pytest.mark.parametrize("step", ["restore_written", "restore_committed"])
def test_a_crash_while_restoring_loses_nothing(prepared, tmp_path, step):
    conversation, before = prepared
    assert _run(tmp_path, conversation, "apply").returncode == 0

    crashed = _run(tmp_path, conversation, "restore", crash_at=step)

    assert crashed.returncode == -signal.SIGKILL
    assert _read(conversation) == before
    archived = Message.objects.filter(archived_in__isnull=False).count()
    assert archived == (24 if step == "restore_written" else 0)
    again = _run(tmp_path, conversation, "restore")
    assert again.returncode == 0, again.stderr
    assert Message.objects.filter(archived_in__isnull=False).count() == 0
    assert (
        segments.forms_of(list(Message.objects.filter(conversation=conversation).order_by("seq")))
        == before
    )
