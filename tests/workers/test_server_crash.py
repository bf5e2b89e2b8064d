"""SIGKILL the server (`manage.py lcm_serve`, uvicorn) while it appends a 1,000-message
batch, 4 times (10 with --slow). A batch is one transaction: afterwards each is entirely
present or entirely absent, nothing is duplicated, and integrity is clean."""

from __future__ import annotations

import random
import threading
import time

import httpx2 as httpx
import pytest

from conversations.models import Message
from tests.factories import ConversationFactory, UserFactory, message_payload
from tests.support import suite
from tests.support.tokens import issue_token
from tests.turns.live import free_port
from tests.workers.processes import assert_consistent, kill_group, start_server, worker_env

pytestmark = pytest.mark.process

KILLS = suite.count(ci=4, slow_count=10)
BATCH = 1000


@pytest.mark.django_db(transaction=True)
def test_killing_the_server_mid_batch_leaves_each_batch_whole_or_absent(settings):
    settings.LCM_AUTOCOMPACT_DISABLED = True
    owner = UserFactory(username="batcher")
    token = issue_token(owner)
    conversation = ConversationFactory(owner=owner)
    env = worker_env()
    rng = random.Random(7)
    answers: list = []
    for attempt in range(KILLS):
        batch = [
            dict(message_payload(attempt * BATCH + k), external_id=f"b{attempt}:{k}")
            for k in range(BATCH)
        ]
        server = start_server(env, worker=False, port=free_port())
        url = f"http://127.0.0.1:{server.args[server.args.index('--port') + 1]}"

        def send(batch=batch, url=url):
            try:
                response = httpx.post(
                    f"{url}/api/v1/conversations/{conversation.pk}/messages/",
                    json={"messages": batch},
                    headers={"Authorization": f"Token {token}"},
                    timeout=60,
                )
                answers.append(response.status_code)
            except httpx.HTTPError:
                answers.append("cut")

        sender = threading.Thread(target=send)
        sender.start()
        time.sleep(rng.uniform(0.05, 1.2))  # somewhere in parsing, inserting or committing
        kill_group(server)
        sender.join(60)

    present = {}
    for attempt in range(KILLS):
        present[attempt] = Message.objects.filter(
            conversation=conversation, external_id__startswith=f"b{attempt}:"
        ).count()
    print(f"answers {answers}; batches present {sum(1 for n in present.values() if n)}/{KILLS}")
    assert set(present.values()) <= {0, BATCH}  # whole or absent, never partial
    for attempt, status in enumerate(answers):
        if status == 201:  # acknowledged means stored
            assert present[attempt] == BATCH
    assert_consistent({conversation.pk: BATCH * sum(1 for n in present.values() if n)})
