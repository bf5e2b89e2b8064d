"""A short run of the mixed load (benchmarks/load.py) against the real server: 8 writers, a
compaction loop, 4 readers for 10 s. 0 errors (no "database is locked" on SQLite), and
exactly the acknowledged messages stored. The 60 s figures: scripts/lcm_load.py."""

from __future__ import annotations

import pytest

from benchmarks.load import run_load
from tests.factories import ConversationFactory, UserFactory, append_messages
from tests.support.tokens import issue_token
from tests.turns.live import free_port
from tests.workers.processes import assert_consistent, kill_group, start_server, worker_env

pytestmark = pytest.mark.process

SECONDS = 10
START = 200


@pytest.mark.django_db(transaction=True)
def test_eight_writers_a_compactor_and_four_readers_make_no_error_and_lose_nothing(settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    owner = UserFactory(username="loader")
    token = issue_token(owner)
    conversations = [ConversationFactory(owner=owner) for _ in range(4)]
    for conversation in conversations:
        append_messages(conversation, START)
    port = free_port()
    server = start_server(worker_env(), worker=False, port=port)
    try:
        result = run_load(
            base_url=f"http://127.0.0.1:{port}",
            token=token,
            conversation_ids=[c.pk for c in conversations],
            seconds=SECONDS,
        )
    finally:
        kill_group(server)
    print(result.table())

    assert result.errors == []
    for name in ("append_one", "append_batch", "compact", "assemble", "grep"):
        assert len(result.samples[name]) > 0, name
    assert_consistent({c.pk: START + result.acknowledged[c.pk] for c in conversations})
