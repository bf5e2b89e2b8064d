"""Issue 43, item 11, under the real ASGI server: an export of ~5 MB answers 202 with the
job's URL at once (the reporter waited 25 s for the archive itself); the job, run by a
worker (here, the test process: the server runs none), reports its progress and stores
the archive, which the server then hands out whole and valid; the same request again is
the same job."""

from __future__ import annotations

import io
import json
import secrets
import time
import zipfile

import httpx2 as httpx
import pytest

from conversations.inputs import parse_message
from conversations.services import messages_append
from security.export_jobs import run_export
from tests.factories import ConversationFactory, UserFactory
from tests.support import suite
from tests.support.tokens import issue_token
from tests.turns.live import LiveServer

pytestmark = [pytest.mark.process(portable=True), pytest.mark.django_db(transaction=True)]


@pytest.fixture
def export_archive_folder():
    """The server keeps archives where its settings say (LCM_DATA_DIR/exports): so does the
    test process that builds them here (no per-test folder)."""


MESSAGES = suite.count(ci=150, slow_count=600)


def test_an_export_answers_at_once_and_its_job_stores_the_archive():
    owner = UserFactory(username="exporter")
    conversation = ConversationFactory(owner=owner)
    # ~1.2 MB of incompressible text in 150 messages (~5 MB in 600 with --slow): seconds
    # of reading and deflating, while the request answers at once.
    for start in range(0, MESSAGES, 50):
        messages_append(
            conversation_id=conversation.pk,
            messages=[
                parse_message({"role": "user", "content": secrets.token_hex(4000)})
                for _ in range(start, start + 50)
            ],
        )
    headers = {"Authorization": f"Token {issue_token(owner)}"}
    with LiveServer() as server, httpx.Client(timeout=120, headers=headers) as client:
        started = time.monotonic()
        asked = client.post(
            server.url + "/api/v1/exports/", json={"conversation_id": conversation.pk}
        )
        answered = time.monotonic() - started
        assert asked.status_code == 202, asked.text
        assert answered < 1.0, answered
        job = asked.json()
        assert asked.headers["location"] == job["url"] and job["state"] == "pending"
        again = client.post(
            server.url + "/api/v1/exports/", json={"conversation_id": conversation.pk}
        )
        assert again.status_code == 202 and again.json()["id"] == job["id"]
        assert client.get(server.url + job["url"] + "archive/").status_code == 409  # not ready

        built = run_export(job["id"])  # the worker's part

        done = client.get(server.url + job["url"]).json()
        assert (done["state"], built.state) == ("done", "done")
        assert done["progress"]["done"] == done["progress"]["total"] > MESSAGES
        download = client.get(server.url + done["download"])
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/zip"
    assert len(download.content) == done["size"]
    archive = zipfile.ZipFile(io.BytesIO(download.content))
    assert archive.testzip() is None
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["tables"]["conversations.Message"]["rows"] == MESSAGES
    assert done["manifest"]["tables"]["conversations.Message"]["rows"] == MESSAGES
    transcript = archive.read(f"transcripts/{conversation.pk}.jsonl").decode().splitlines()
    assert len(transcript) == MESSAGES
