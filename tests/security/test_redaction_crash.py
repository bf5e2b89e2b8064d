"""Crash safety of redaction: a real `manage.py lcm_redact` process is SIGKILLed right
after a step is recorded (security.redaction.jobs.crash_point), on the test database;
`lcm_redact resume` finishes the job, verify finds nothing and integrity is clean. The
default run kills after one step (summaries); `--slow` after every one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
from django.core.files.storage import storages

from core.object_storage import storages_setting
from integrity.checks import Scope
from integrity.report import scan
from lcmsite import settings as site_settings
from security.models import Redaction
from security.redaction.jobs import STEP_NAMES
from security.redaction.verify import verify
from tests.security.test_redaction import SECRET, _planted
from tests.support import suite
from tests.turns.live import ROOT, child_env

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

STEPS = STEP_NAMES[:-1] if suite.slow() else ("summaries",)


@pytest.fixture
def child_storages(settings, data_dir, offline_engine):
    """The parent reads and writes where the child does: the storages under DATA_DIR."""
    settings.STORAGES = {
        **settings.STORAGES,
        **storages_setting(lcm=site_settings.LCM, data_dir=data_dir),
    }
    for alias in ("large_files", "archive_segments", "stream_journals"):
        storages._storages.pop(alias, None)
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000
    settings.LCM_SECRET_POLICY = "off"  # the secret was stored as sent (test_redaction.py)
    yield
    for alias in ("large_files", "archive_segments", "stream_journals"):
        storages._storages.pop(alias, None)


def _command(*args: str, crash_at: str | None = None, stdin: str = ""):
    env = child_env(LCM_LARGE_FILE_TOKEN_THRESHOLD="1000")
    env.pop("LCM_REDACT_CRASH_AT", None)
    if crash_at:
        env["LCM_REDACT_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "lcm_redact", *args],
        cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


@pytest.mark.parametrize("step", STEPS)
def test_a_killed_redaction_resumes_to_the_end(user, child_storages, step):
    conversation = _planted(user)
    killed = _command(
        "redact", "--conversation", str(conversation.pk), "--stdin",
        crash_at=step, stdin=SECRET + "\n",
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    row = Redaction.objects.get()
    assert row.state == "running" and step in row.steps and len(row.steps) < len(STEP_NAMES)
    assert row.sealed and SECRET not in row.sealed  # kept for the resume, encrypted
    assert scan(Scope(None)).total_problems == 0

    resumed = _command("resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout)["resumed"] == [row.pk]
    row.refresh_from_db()
    assert row.state == "done" and row.sealed == "", row.verification
    assert row.verification["occurrences"] == 0, row.verification
    assert verify([SECRET]).count == 0
    assert scan(Scope(None)).total_problems == 0


def test_a_running_server_serves_the_redacted_text_after_a_redaction_elsewhere(
    user, child_storages
):
    """Caches of another process: a server renders the conversation's summaries and reads
    its archived messages (both cached per process), this process redacts, and the server's
    next answers hold the marker, not the secret."""
    from security.redaction import jobs
    from security.redaction.request import parse, scope_of_conversation
    from tests.support.tokens import issue_token
    from tests.turns.live import LiveServer, httpx

    conversation = _planted(user)
    headers = {"Authorization": f"Token {issue_token(user)}"}
    assemble = f"/api/v1/conversations/{conversation.pk}/assemble/"
    listing = f"/api/v1/conversations/{conversation.pk}/messages/?limit=1000"
    with LiveServer() as server, httpx.Client(base_url=server.url, headers=headers) as client:
        first = client.post(assemble, json={}).text
        assert SECRET in first  # a summary quotes it
        assert SECRET in client.get(listing).text  # the archived message, from its segment
        row = jobs.start(
            parse({"literal": SECRET}, scope_of_conversation(conversation)), via="command"
        )
        marker = jobs.report(row)["marker"]
        assembled, listed = client.post(assemble, json={}).text, client.get(listing).text
    assert row.verification["occurrences"] == 0
    assert SECRET not in assembled and assembled != first  # the regenerated summary
    assert SECRET not in listed and marker in listed
