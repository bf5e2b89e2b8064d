"""`lcm_watch --server`: a watcher sends a growing Claude Code session to a second server
process, which is down for a while at first; every message arrives exactly once and the
offsets advance only once the server acknowledged. (A retried piece and a mirror that is
behind: tests/watch/test_mirror_api.py.)"""

from __future__ import annotations

import json
import threading

import pytest

from conversations.models import Message
from importers.models import WatchedFile
from importers.watch.loop import Watcher
from importers.watch.remote import RemoteSink
from tests.factories import UserFactory
from tests.importers.agent_sessions import SESSION, opencode_session, write_opencode_db
from tests.support.tokens import issue_token
from tests.turns.live import free_port
from tests.workers.processes import kill_group, start_server, wait_for, worker_env

from .test_watcher import linear_session

pytestmark = pytest.mark.process


def _pass_in_background(watcher: Watcher) -> threading.Thread:
    thread = threading.Thread(target=watcher.run_pass, daemon=True)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
def test_a_remote_watcher_survives_a_server_that_is_down(stores):
    owner = UserFactory(username="laptop")
    token = issue_token(owner)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    watcher = Watcher(stores, RemoteSink(url, token, first_backoff=0.1), log=lambda t: None)
    records = linear_session(4)
    path = stores[0].root / "-work-app" / f"{SESSION}.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:10]))

    def received() -> int:
        return Message.objects.filter(conversation__owner=owner).count()

    sending = _pass_in_background(watcher)  # the server is not up yet: retried
    sending.join(1.0)
    assert sending.is_alive() and not WatchedFile.objects.exists()
    env = worker_env()
    server = start_server(env, worker=False, port=port)
    try:
        sending.join(30)
        assert not sending.is_alive() and received() == 8
        assert WatchedFile.objects.get(path=str(path)).lines == 10
        path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"half')
        assert watcher.run_pass().messages == 8
        wait_for(lambda: received() == 16, timeout=5)
        # OpenCode's database travels as one consistent copy and imports like a local one.
        write_opencode_db(stores[3].root / "opencode.db", [opencode_session()])
        added = watcher.run_pass().messages
        assert added > 0 and received() == 16 + added
        assert watcher.run_pass().files == 0
    finally:
        kill_group(server)
    expected = [f"claude-code:{r['uuid']}" for r in records if r["type"] != "attachment"]
    stored = Message.objects.filter(conversation__session_id=SESSION).order_by("seq")
    assert list(stored.values_list("external_id", flat=True)) == expected
    assert WatchedFile.objects.get(path=str(path)).lines == 20
