"""An export is streamed as it is built, under the real ASGI server: the first bytes of
the zip arrive long before the archive is complete, no Content-Length is promised (the
size is not known in advance), and the streamed bytes are a whole, valid archive."""

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
from tests.factories import ConversationFactory, UserFactory
from tests.support.tokens import issue_token
from tests.turns.live import LiveServer

pytestmark = [pytest.mark.process(portable=True), pytest.mark.django_db(transaction=True)]


def test_an_export_streams_its_archive_as_it_is_built():
    owner = UserFactory(username="exporter")
    conversation = ConversationFactory(owner=owner)
    # ~5 MB of incompressible text in 600 messages: seconds of reading and deflating.
    for start in range(0, 600, 200):
        messages_append(
            conversation_id=conversation.pk,
            messages=[
                parse_message({"role": "user", "content": secrets.token_hex(4000)})
                for _ in range(start, start + 200)
            ],
        )
    key = issue_token(owner)
    with LiveServer() as server, httpx.Client(timeout=120) as client:
        started = time.monotonic()
        with client.stream(
            "POST",
            server.url + "/api/v1/exports/",
            json={"conversation_id": conversation.pk},
            headers={"Authorization": f"Token {key}"},
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "application/zip"
            assert "content-length" not in response.headers
            assert response.headers["transfer-encoding"] == "chunked"
            chunks, first = [], None
            for chunk in response.iter_raw():
                if first is None:
                    first = time.monotonic() - started
                chunks.append(chunk)
            total = time.monotonic() - started
    data = b"".join(chunks)
    assert first is not None and first < total / 3, (first, total)
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert archive.testzip() is None
    manifest = json.loads(archive.read("manifest.json"))
    assert manifest["tables"]["conversations.Message"]["rows"] == 600
    transcript = archive.read(f"transcripts/{conversation.pk}.jsonl").decode().splitlines()
    assert len(transcript) == 600
