"""API keys live in the environment only (SRD 14.1), and the redaction hook covers every
outbound prompt: a canary key across a full run (a streamed turn, a compaction with the
Anthropic summarizer, an expansion, and provider 401s that echo the key) appears in no
table, no file under the data directory, no log line and no error body; a real-looking
secret in the conversation reaches the provider masked in all three kinds of request."""

from __future__ import annotations

import logging

import pytest
from django.db import connection

from conversations.inputs import parse_message
from conversations.models import Summary
from conversations.services import messages_append
from tests.factories import append_messages
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    Scripted,
    anthropic_text_stream,
    message,
)
from turns import runner
from turns import services as turn_services
from turns.models import Branch

pytestmark = pytest.mark.usefixtures("large_file_storage", "offline_engine")

CANARY = "canary-7f3a9c11d2e4b5a6"  # no secret shape: only non-persistence can hide it
SECRET = "sk-ant-api03-Zq8Xw2Vb6Nm4Lk0Jh9Gf7Ds5Aa3Qp1Wo9Ei7Ru5Ty3"
SUMMARY = "The user shared deployment notes.\nExpand for details about: the deployment steps"


def _echoing_401() -> Scripted:
    return Scripted(
        401,
        {
            "type": "error",
            "error": {"type": "authentication_error", "message": f"invalid x-api-key {CANARY}"},
        },
    )


def _database_text() -> str:
    """Every value of every column of every table, as text."""
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        chunks.append(bytes(value).decode("latin-1"))
                    else:
                        chunks.append(str(value))
    return "\n".join(chunks)


def _files_text(folder) -> str:
    return "\n".join(
        path.read_bytes().decode("latin-1") for path in folder.rglob("*") if path.is_file()
    )


def test_a_canary_key_is_nowhere_after_a_turn_a_compaction_an_expansion_and_401s(
    api, user, settings, monkeypatch, tmp_path, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    settings.LCM_LEAF_CHUNK_TOKENS = 100_000
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_AUTOCOMPACT_DISABLED = True
    settings.LCM_SUMMARY_MAX_RETRIES = 0
    # The secret must reach the store as sent: this test is about outbound redaction (ingest
    # masking has its own tests, tests/conversations/test_secrets_at_ingest.py).
    settings.LCM_SECRET_POLICY = "off"
    with FakeMessagesAPI() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        bodies: list[str] = []

        # 1. A streamed turn on "sonnet" whose prompt carries a secret.
        fake.enqueue(anthropic_text_stream("Noted, the deploy uses the staging key."))
        chat = turn_services.session_create(owner=user, title="c", default_model="sonnet")
        branch = Branch.objects.get(pk=chat.active_branch_id)
        turn = turn_services.turn_accept(
            session=chat, branch=branch, content=f"deploy with {SECRET} please"
        )
        turn = runner.run_turn(turn_id=turn.id)
        assert turn.phase == "response_finalized", turn.phase
        turn_request = fake.requests[-1]
        # Sent in the header, as it must be (this SDK version sends it as a bearer token).
        assert f"Bearer {CANARY}" in turn_request.headers.values()

        # 2. A compaction through the API: the Anthropic summarizer (key from the env).
        conversation = branch.conversation
        append_messages(conversation, 30, start=10)
        messages_append(
            conversation_id=conversation.pk,
            messages=[parse_message({"role": "user", "content": f"the key is {SECRET}"})],
        )
        fake.enqueue(message(SUMMARY))
        compacted = api.post(
            f"/api/v1/conversations/{conversation.pk}/compact/", {"wait": True}, format="json"
        )
        assert compacted.status_code == 200, compacted.content
        bodies.append(compacted.content.decode())
        summary_request = fake.requests[-1]
        summary = Summary.objects.filter(conversation=conversation).first()
        assert summary is not None

        # 3. An expansion through the model.
        fake.enqueue(message(f"The key was {SECRET}; see {summary.id}."))
        expanded = api.post(
            "/api/v1/expansions/",
            {"prompt": f"what about {SECRET}?", "summary_ids": [summary.id]},
            format="json",
        )
        assert expanded.status_code == 200, expanded.content
        bodies.append(expanded.content.decode())
        expansion_request = fake.requests[-1]

        # 4. 401s that echo the key: in a compaction, an expansion and a turn.
        append_messages(conversation, 30, start=100)
        fake.enqueue(_echoing_401())
        failed = api.post(
            f"/api/v1/conversations/{conversation.pk}/compact/", {"wait": True}, format="json"
        )
        assert failed.status_code == 502, failed.content
        bodies.append(failed.content.decode())
        fake.enqueue(_echoing_401())
        refused = api.post(
            "/api/v1/expansions/", {"prompt": "again", "summary_ids": [summary.id]}, format="json"
        )
        assert refused.status_code >= 400
        bodies.append(refused.content.decode())
        fake.enqueue(_echoing_401())
        failed_turn = turn_services.turn_accept(session=chat, branch=branch, content="more")
        failed_turn = runner.run_turn(turn_id=failed_turn.id)
        assert failed_turn.phase == "failed", failed_turn.phase
        detail = api.get(f"/api/v1/sessions/{chat.pk}/turns/")
        bodies.append(detail.content.decode())

    # The provider saw the secret masked in every kind of request.
    for recorded in (turn_request, summary_request, expansion_request):
        sent = recorded.raw.decode()
        assert SECRET not in sent, recorded.body
        assert "[REDACTED:anthropic_key]" in sent
        assert CANARY not in sent

    # The canary is nowhere we keep anything.
    captured = capfd.readouterr()
    log_text = (
        "\n".join(f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records)
        + captured.out
        + captured.err
    )
    assert caplog.records  # the run did log (retries, failures): the check is not vacuous
    database, files = _database_text(), _files_text(tmp_path)
    assert SECRET in database  # the dump does reach message content (canonical, unredacted)
    assert "lcm.journal_open" in files  # and the stream journals
    assert CANARY not in database
    assert CANARY not in files
    assert CANARY not in log_text
    for body in bodies:
        assert CANARY not in body
