"""Shared storage on a real S3 wire protocol: moto's server, driven by django-storages and
boto3 exactly as a deployment with LCM_S3_BUCKET would. Large files go to the bucket
encrypted (the EncryptedStorage wrapper stays) and come back through the API; a turn's
stream journal and event log are published to the bucket when the turn ends and a
resumed stream and crash recovery read them from there."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from core import crypto
from core.config import load_lcm_settings
from core.object_storage import storages_setting
from tests.conftest import token_client
from tests.factories import UserFactory
from tests.turns.live import free_port, parse_sse
from tests.workers.processes import wait_for

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

BUCKET = "lcm-shared"
KEY = Fernet.generate_key().decode()
BODY = "".join(f"row {i}: the secret quarterly figure is {i * 7}\n" for i in range(400))


@pytest.fixture(scope="module")
def s3_endpoint():
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint, monkeypatch, settings, tmp_path):
    """A fresh bucket, and STORAGES built from LCM_S3_* as settings.py builds it."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test-key-id",
        "AWS_SECRET_ACCESS_KEY": "test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket=BUCKET)
    lcm = load_lcm_settings({"LCM_S3_BUCKET": BUCKET, "LCM_S3_ENDPOINT_URL": s3_endpoint})
    settings.DATA_DIR = tmp_path
    settings.STORAGES = {**settings.STORAGES, **storages_setting(lcm=lcm, data_dir=tmp_path)}
    yield client
    listed = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    for item in listed:
        client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def keys(client, prefix: str) -> list[str]:
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return sorted(item["Key"] for item in listed)


def stored(client, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


@pytest.mark.django_db
def test_a_large_file_is_kept_encrypted_in_the_bucket_and_read_back_through_the_api(
    bucket, settings, api, conversation
):
    from conversations.inputs import parse_message
    from conversations.services import messages_append
    from largefiles.models import LargeFile

    settings.LCM_ENCRYPTION_KEY = KEY
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000
    content = f'<file name="figures.txt" mime="text/plain">{BODY}</file>'
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": content})],
    )
    row = LargeFile.objects.get(conversation=conversation)

    assert keys(bucket, "lcm/large-files/") == [f"lcm/large-files/{row.storage_key}"]
    on_s3 = stored(bucket, f"lcm/large-files/{row.storage_key}")
    assert on_s3.startswith(crypto.MAGIC)
    assert b"quarterly" not in on_s3
    assert not (settings.DATA_DIR / "large-files").exists()  # nothing written locally

    pages = []
    for offset in range(0, len(BODY.encode()), 4096):
        response = api.get(f"/api/v1/files/{row.id}/content/?offset={offset}&limit=4096")
        assert response.status_code in (200, 206), response.content
        pages.append(response.content)
    assert b"".join(pages) == BODY.encode()
    ranged = api.get(f"/api/v1/files/{row.id}/content/?offset=7&limit=20")
    assert ranged.content == BODY.encode()[7:27]


@pytest.mark.django_db(transaction=True)
def test_a_turns_journal_and_event_log_are_published_to_the_bucket_and_replayed_from_it(
    bucket, settings, monkeypatch
):
    from turns import events as E
    from turns import runner, services
    from turns.journal import CLOSE_EVENT, recover_step
    from turns.models import ProviderStep

    for name in ("LCM_CONFIG_FILE", "LCM_DEFAULT_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.LCM_ENCRYPTION_KEY = KEY
    settings.LCM_OFFLINE_STREAM_CHUNKS = 5
    runner._shutting_down.clear()
    owner = UserFactory(username="s3-owner")
    client = token_client(owner)
    session = services.session_create(owner=owner, title="chat", default_model="offline")

    response = client.post(
        f"/api/v1/sessions/{session.id}/turns/",
        {"content": "hello from the bucket", "stream": True},
        format="json",
    )
    live = list(parse_sse(b"".join(response.streaming_content).decode().split("\n")))
    assert live[-1].event == "done"
    turn_id = live[0].data["turn_id"]
    step = ProviderStep.objects.get(turn_id=turn_id)

    # Published whole, once finished (the event log right after the runner wrote its
    # terminal event, which the client may read first); nothing left locally. A file is
    # removed just after its upload is stored (never before), so wait for both.
    expected = sorted([f"lcm/streams/{step.id}.jsonl", f"lcm/streams/turn-{turn_id}.events.jsonl"])
    wait_for(lambda: keys(bucket, "lcm/streams/") == expected, timeout=10)
    local = settings.DATA_DIR / "streams"
    wait_for(lambda: not list(local.glob("*.jsonl")), timeout=10)
    assert keys(bucket, "lcm/streams/") == expected
    assert list(local.glob("*.jsonl")) == []
    assert b"hello from the bucket" not in stored(bucket, f"lcm/streams/{step.id}.jsonl")

    # Replay from the bucket: a resumed stream served by a process that never ran the turn
    # (no live channel here), and the journal's recovery of the step's output.
    E._channels.clear()
    resumed = client.get(f"/api/v1/turns/{turn_id}/stream/?after=3")
    replayed = list(parse_sse(b"".join(resumed.streaming_content).decode().split("\n")))
    assert [(e.id, e.event, e.data) for e in replayed] == [
        (e.id, e.event, e.data) for e in live[3:]
    ]
    recovered = recover_step(step)
    assert recovered.ended and not recovered.writer_alive
    assert recovered.text == live[-1].data["text"]
    assert recovered.last_event_type == CLOSE_EVENT


@pytest.mark.django_db
def test_a_crashed_writers_journal_is_recovered_from_its_local_tail_then_published(
    bucket, settings
):
    from turns import journal_store
    from turns.journal import StreamJournal, journal_path, read_entries

    journal = StreamJournal(step_id="01CRASHED", provider="anthropic")
    journal.write("lcm.text", {"index": 0, "text": "partial ans"}, shown="partial ans")
    journal.abandon()  # the process died: no close marker, nothing published
    path = journal_path("01CRASHED")
    assert path.exists() and keys(bucket, "lcm/streams/") == []

    assert journal_store.publish(path)  # what the reconciler does once it recovered it
    assert not path.exists()
    assert keys(bucket, "lcm/streams/") == ["lcm/streams/01CRASHED.jsonl"]
    entries = read_entries(path)
    assert [e["payload"].get("text") for e in entries if e["event_type"] == "lcm.text"] == [
        "partial ans"
    ]
    journal_store.delete(path)  # hard delete removes the published object
    assert keys(bucket, "lcm/streams/") == []


@pytest.mark.django_db
def test_the_reconciler_publishes_a_dead_writers_journal_and_leaves_other_hosts_steps_alone(
    bucket, user, monkeypatch
):
    from datetime import timedelta

    from django.utils import timezone

    from tests.turns.test_reconcile import _dead_pid, _journal, _responding_turn
    from turns import services
    from turns.models import Phase
    from turns.reconcile import FOREIGN_STEP_SECONDS, reconcile

    for name in ("LCM_CONFIG_FILE", "LCM_DEFAULT_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    chat = services.session_create(owner=user, title="chat")
    # A writer of this host died mid-stream: recovered from its local tail, then published.
    dead_turn, dead_step = _responding_turn(chat)
    _journal(dead_step, _dead_pid(), ["Once upon ", "a time"])
    assert reconcile()["steps_recovered"] == 1
    dead_turn.refresh_from_db()
    assert dead_turn.final_assistant_message["rendered_text"] == "Once upon a time"
    assert keys(bucket, "lcm/streams/") == [f"lcm/streams/{dead_step.id}.jsonl"]
    assert not Path(dead_step.stream_path).exists()

    # A step streaming on another host: its journal is on that host's disk, not here.
    other_chat = services.session_create(owner=user, title="elsewhere")
    turn, step = _responding_turn(other_chat)
    later = timezone.now() + timedelta(seconds=120)
    assert reconcile(now=later)["steps_recovered"] == 0
    turn.refresh_from_db()
    assert turn.phase == Phase.RESPONDING
    gone = timezone.now() + timedelta(seconds=FOREIGN_STEP_SECONDS + 1)
    assert reconcile(now=gone)["steps_recovered"] == 1  # its host never came back
    turn.refresh_from_db()
    assert turn.phase == Phase.FAILED


@pytest.mark.django_db
def test_key_rotation_rewrites_the_objects_and_journals_in_the_bucket(bucket, settings):
    from django.core.management import call_command

    from largefiles.store import read_range, write_object
    from turns.journal import StreamJournal, journal_path, read_entries

    settings.LCM_ENCRYPTION_KEY = KEY
    write_object("3/01OBJ.txt", b"the secret object")
    journal = StreamJournal(step_id="01ROTS3", provider="anthropic")
    journal.write("lcm.text", {"index": 0, "text": "secret"}, shown="secret")
    journal.close()  # published to the bucket
    before = {
        key: stored(bucket, key)
        for key in ("lcm/large-files/3/01OBJ.txt", "lcm/streams/01ROTS3.jsonl")
    }

    new_key = Fernet.generate_key().decode()
    settings.LCM_ENCRYPTION_KEY = new_key
    settings.LCM_ENCRYPTION_OLD_KEYS = KEY
    call_command("lcm_rotate_key")

    settings.LCM_ENCRYPTION_OLD_KEYS = ""  # the old key is gone: everything still reads
    for key, old in before.items():
        assert stored(bucket, key) != old
    assert read_range("3/01OBJ.txt", offset=0, limit=100) == b"the secret object"
    texts = [e["payload"]["text"] for e in read_entries(journal_path("01ROTS3")) if e["seq"] == 2]
    assert texts == ["secret"]
