"""Rate limits are shared across web processes when Redis is configured: two real
`lcm_serve` processes on one database and one Redis together allow the rate once, not
once each. The control run (no Redis, each process counting alone) shows the test can
fail."""

from __future__ import annotations

import shutil
import subprocess

import httpx2 as httpx
import pytest

from tests.factories import UserFactory
from tests.support.tokens import issue_token
from tests.turns.live import child_env, free_port
from tests.workers.processes import kill_group, start_server, wait_for

RATE = 6
pytestmark = [
    pytest.mark.process(portable=True),
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]


@pytest.fixture
def redis_url(tmp_path):
    port = free_port()
    process = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)

    def up() -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    wait_for(up, timeout=20, step=0.05)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(10)


def _two_servers(**extra: str) -> list[tuple[subprocess.Popen, int]]:
    env = child_env(
        LCM_THROTTLE_USER_RATE=f"{RATE}/hour",  # an hour: no window ends mid-test
        LCM_THROTTLE_IP_RATE="",
        LCM_AUTH_FAILURE_RATE="",
        **extra,
    )
    servers = []
    try:
        for _ in range(2):
            port = free_port()
            servers.append((start_server(env, worker=False, port=port), port))
    except BaseException:
        for process, _ in servers:
            kill_group(process)
        raise
    return servers


def _alternate(servers, key: str, count: int) -> list[tuple[int, int]]:
    """(server index, status) of `count` requests sent to the servers in turn."""
    answers = []
    for n in range(count):
        _, port = servers[n % 2]
        response = httpx.get(
            f"http://127.0.0.1:{port}/api/v1/conversations/",
            headers={"Authorization": f"Token {key}"},
            timeout=10,
        )
        answers.append((n % 2, response.status_code))
    return answers


def test_two_processes_share_one_limit_through_redis(redis_url):
    key = issue_token(UserFactory(username="shared"))
    servers = _two_servers(LCM_REDIS_URL=redis_url)
    try:
        answers = _alternate(servers, key, RATE + 2)
    finally:
        for process, _ in servers:
            kill_group(process)
    # 6 requests in all, 3 through each process, then both refuse.
    assert [status for _, status in answers] == [200] * RATE + [429, 429]
    assert {index for index, status in answers if status == 429} == {0, 1}


def test_without_redis_each_process_counts_alone():
    key = issue_token(UserFactory(username="alone"))
    servers = _two_servers(LCM_REDIS_URL="")
    try:
        answers = _alternate(servers, key, RATE + 2)
    finally:
        for process, _ in servers:
            kill_group(process)
    assert [status for _, status in answers] == [200] * (RATE + 2)
