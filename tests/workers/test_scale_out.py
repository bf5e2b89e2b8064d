"""Scale-out on one PostgreSQL and one Redis broker: 3 web processes (`lcm_serve`) take
single and batch appends round-robin on 4 conversations while compaction jobs, requested
through those same processes, run on 2 worker processes (`qcluster`).

Checked afterwards: the per-conversation lock held across processes (seq 1..n with no
gap, exactly the acknowledged messages, integrity clean), no job ran twice at the same
time (one claim per job, one run per job, and the runs of one conversation never overlap),
both workers ran jobs (two runs open at once), and every job and run is terminal.
The throughput figures: scripts/lcm_scale_out.py (docs/benchmarks.md, "Scale-out")."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
import redis

from benchmarks.scale_out import overlapping_runs, run_ingest
from compaction.models import CompactionJob, CompactionRun
from tests.factories import ConversationFactory, UserFactory, append_messages
from tests.support.fake_messages_api import message
from tests.support.tokens import issue_token
from tests.turns.live import ROOT, free_port
from tests.workers.processes import (
    assert_consistent,
    jobs_terminal,
    kill_group,
    wait_for,
    worker_env,
)

pytestmark = pytest.mark.process

WEB_PROCESSES = 3
WORKER_PROCESSES = 2
CONVERSATIONS = 4
START = 160
SECONDS = 12


@pytest.fixture
def redis_url():
    """A reachable Redis (LCM_TEST_REDIS_URL, default database 1 on localhost): skipped
    locally without one, a failure in CI (like PostgreSQL)."""
    url = os.environ.get("LCM_TEST_REDIS_URL", "redis://127.0.0.1:6379/1")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as error:
        if os.environ.get("CI"):
            pytest.fail(f"Redis is required in CI and is not reachable at {url}: {error}")
        pytest.skip(f"Redis not reachable at {url} (set LCM_TEST_REDIS_URL)")
    return url


def start_worker(env: dict, name: str) -> subprocess.Popen:
    """`manage.py qcluster` in its own process group, its output in the data directory."""
    log = open(os.path.join(env["LCM_DATA_DIR"], f"{name}.log"), "ab")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_web_processes(env: dict, count: int) -> list[tuple[str, subprocess.Popen]]:
    """`count` × `lcm_serve --no-worker` started side by side; returns once all answer."""
    import httpx2 as httpx

    started = []
    for _ in range(count):
        port = free_port()
        log = open(os.path.join(env["LCM_DATA_DIR"], f"server-{port}.log"), "ab")  # noqa: SIM115
        command = [sys.executable, str(ROOT / "manage.py"), "lcm_serve", "--no-worker"]
        command += ["--no-demo", "--no-migrate", "--port", str(port)]
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        started.append((f"http://127.0.0.1:{port}", process))

    def all_up() -> bool:
        for url, process in started:
            if process.poll() is not None:
                raise AssertionError(f"lcm_serve {url} exited with {process.returncode}")
            try:
                httpx.get(f"{url}/api/v1/models/", timeout=1)
            except httpx.HTTPError:
                return False
        return True

    wait_for(all_up, timeout=90, step=0.2)
    return started


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_three_web_processes_and_two_workers_keep_every_conversation_whole(
    fake_messages_api, redis_url, settings
):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    owner = UserFactory(username="scaler")
    token = issue_token(owner)
    conversations = [ConversationFactory(owner=owner) for _ in range(CONVERSATIONS)]
    for conversation in conversations:
        append_messages(conversation, START)
    fake_messages_api.enqueue(*[message("A short summary.", delay=0.08) for _ in range(5000)])
    # A queue of its own, so no other cluster on this Redis takes (or feeds) our jobs.
    queue = f"lcm-scale-test-{uuid.uuid4().hex[:8]}"
    env = worker_env(
        fake_messages_api,
        LCM_REDIS_URL=redis_url,
        LCM_QUEUE_NAME=queue,
        # Compaction is under test: message indexing (memory) would queue a job per append,
        # and each summary's indexing job (which shares the queue) embeds with no model.
        LCM_MEMORY_INDEX_MESSAGES="0",
        LCM_EMBEDDING_BACKEND="hashing",
    )
    processes = []
    try:
        processes += [start_worker(env, f"worker-{n}") for n in range(WORKER_PROCESSES)]
        web = start_web_processes(env, WEB_PROCESSES)
        processes += [process for _, process in web]
        result = run_ingest(
            base_urls=[url for url, _ in web],
            token=token,
            conversation_ids=[c.pk for c in conversations],
            seconds=SECONDS,
            # One leaf pass (and its condensations) per job: many short jobs, so many claims
            # race; and the queue drains within seconds once the writers stop.
            compact_mode="incremental",
        )
        try:
            drained_in = wait_for(jobs_terminal, timeout=60, step=0.2)
        except AssertionError:
            states = list(CompactionJob.objects.values_list("state", "attempts", "error"))
            raise AssertionError(f"jobs not terminal: {states[-20:]}") from None
    finally:
        for process in processes:
            kill_group(process)
        redis.Redis.from_url(redis_url).delete(f"django_q:{queue}:q")  # tasks nobody took

    jobs = list(CompactionJob.objects.all())
    runs = list(CompactionRun.objects.exclude(finished_at=None))
    print(
        f"{result.messages} messages acknowledged in {SECONDS}s via {dict(result.per_server)}; "
        f"{len(jobs)} jobs ({sum(j.state == 'succeeded' for j in jobs)} succeeded), "
        f"{len(runs)} runs, {sum(r.passes for r in runs)} passes; drained in {drained_in:.1f}s"
    )

    assert result.errors == []
    # Every web process took a share of the appends.
    assert set(result.per_server) == {url for url, _ in web}
    assert min(result.per_server.values()) > 0
    # The per-conversation lock held across processes: nothing lost, nothing twice.
    assert_consistent({c.pk: START + result.acknowledged[c.pk] for c in conversations})

    # No job ran twice: one claim each (a second delivery of a task claimed nothing),
    # and each job has its own run.
    assert jobs and sum(j.state == "succeeded" for j in jobs) >= CONVERSATIONS
    assert {j.attempts for j in jobs} == {1}
    for job in jobs:
        # The only other ending: another run held the conversation (its work was done there).
        assert job.state == "succeeded" or job.error.startswith("conflict"), job.error
    job_runs = [j.run_id for j in jobs if j.run_id is not None]
    assert len(job_runs) == len(set(job_runs))
    assert sum(r.passes for r in runs) > 0

    # The runs of one conversation never overlap; across conversations two ran at once,
    # so both worker processes took jobs (each runs one job at a time: LCM_WORKERS=1).
    intervals = {}
    for run in runs:
        intervals.setdefault(run.conversation_id, []).append(
            (run.started_at.timestamp(), run.finished_at.timestamp())
        )
    for conversation_id, spans in intervals.items():
        # 50 ms of slack for the timestamps (see overlapping_runs); a run here takes 0.2 s
        # or more, so two that truly ran at once still count as overlapping.
        assert overlapping_runs(spans, slack=0.05) == 1, (conversation_id, sorted(spans))
    everything = [span for spans in intervals.values() for span in spans]
    assert overlapping_runs(everything, slack=0.05) == WORKER_PROCESSES
