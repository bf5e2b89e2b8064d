"""Export archives: user-initiated, audited, full fidelity (rows, transcript, files, streams)."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.utils import timezone

from conversations.models import Message, Summary, SummaryMessage
from core import crypto
from largefiles.models import LargeFile
from security.export_store import archive_storage, expire_due
from security.models import AuditEvent, ExportJob
from security.redaction import jobs
from security.redaction.request import parse, scope_of_conversation
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.security.exporting import export_download, export_job
from tests.security.test_hard_delete import FILE_BODY, MARKER, _full_conversation
from tests.turns.conftest import send
from turns import services as turn_services
from turns.models import ProviderStep, UserTurn

pytestmark = pytest.mark.usefixtures("large_file_storage", "offline_engine")


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000


def _body(response) -> bytes:
    """The streamed archive's bytes (the export is sent as it is built)."""
    return b"".join(response.streaming_content)


def _open(data) -> tuple[zipfile.ZipFile, dict]:
    if not isinstance(data, bytes):
        data = _body(data)
    archive = zipfile.ZipFile(io.BytesIO(data))
    return archive, json.loads(archive.read("manifest.json"))


def _jsonl(archive, name) -> list[dict]:
    return [json.loads(line) for line in archive.read(name).decode().splitlines()]


def test_a_conversation_export_holds_every_row_the_transcript_and_the_files(
    api, user, django_capture_on_commit_callbacks
):
    conversation = _full_conversation(user)
    response = export_download(
        api, {"conversation_id": conversation.pk}, django_capture_on_commit_callbacks
    )
    assert response["Content-Type"] == "application/zip"
    assert f"lcm-conversation-{conversation.pk}.zip" in response["Content-Disposition"]
    archive, manifest = _open(response)
    assert (manifest["format"], manifest["version"]) == ("lcm-archive", 1)
    assert manifest["target"] == {"kind": "conversation", "id": str(conversation.pk)}
    assert manifest["exported_by"] == "owner"
    messages = _jsonl(archive, "tables/conversations.Message.jsonl")
    assert [m["seq"] for m in messages] == list(
        Message.objects.filter(conversation=conversation)
        .order_by("pk")
        .values_list("seq", flat=True)
    )
    assert (
        manifest["tables"]["conversations.Summary"]["rows"]
        == Summary.objects.filter(conversation=conversation).count()
    )
    assert manifest["tables"]["conversations.SummaryMessage"]["rows"] == (
        SummaryMessage.objects.filter(conversation=conversation).count()
    )
    for entry in manifest["tables"].values():
        assert hashlib.sha256(archive.read(entry["file"])).hexdigest() == entry["sha256"]
    transcript = _jsonl(archive, f"transcripts/{conversation.pk}.jsonl")
    assert len(transcript) == 14 and MARKER in transcript[12]["content"]
    large_file = LargeFile.objects.get(conversation=conversation)
    [entry] = manifest["files"]
    assert archive.read(entry["path"]).decode() == FILE_BODY
    assert entry["sha256"] == large_file.sha256
    event = AuditEvent.objects.get(action="export")
    assert (event.via, event.target_id, event.actor_id) == ("api", str(conversation.pk), user.pk)
    assert MARKER not in json.dumps(event.details)


def test_a_session_export_holds_turns_steps_states_and_decrypted_journals(
    api, user, settings, django_capture_on_commit_callbacks
):
    settings.LCM_ENCRYPTION_KEY = Fernet.generate_key().decode()
    chat = turn_services.session_create(owner=user, title="chat")
    turns = [send(chat, f"question {i} {MARKER}", commit=True) for i in range(2)]
    response = export_download(api, {"session_id": chat.pk}, django_capture_on_commit_callbacks)
    archive, manifest = _open(response)
    assert [t["id"] for t in _jsonl(archive, "tables/turns.UserTurn.jsonl")] == sorted(
        t.pk for t in turns
    )
    assert manifest["tables"]["turns.ProviderStep"]["rows"] == ProviderStep.objects.count()
    assert manifest["tables"]["turns.StateCheckpoint"]["rows"] >= 3
    assert manifest["tables"]["turns.Session"]["rows"] == 1
    journals = [s for s in manifest["streams"] if not s["path"].startswith("streams/turn-")]
    assert len(journals) == ProviderStep.objects.count()
    first = archive.read(journals[0]["path"]).decode().splitlines()[0]
    assert json.loads(first)["event_type"] == "lcm.journal_open"  # clear, not ciphertext
    assert UserTurn.objects.count() == 2
    # Kept on the server encrypted (LCM_ENCRYPTION_KEY), handed out clear.
    job = ExportJob.objects.get()
    assert archive_storage().read_stored(job.storage_key).startswith(crypto.MAGIC)


def test_the_same_export_asked_again_is_the_same_job_and_a_redaction_deletes_its_archive(
    api, user, django_capture_on_commit_callbacks
):
    conversation = _full_conversation(user)
    body = {"conversation_id": conversation.pk}
    first = export_job(api, body, django_capture_on_commit_callbacks)
    again = export_job(api, body, django_capture_on_commit_callbacks)
    assert first["id"] == again["id"] and ExportJob.objects.count() == 1
    assert AuditEvent.objects.filter(action="export").count() == 1
    assert first["progress"]["done"] == first["progress"]["total"] > 0
    assert first["size"] > 0 and first["expires_at"] is not None
    ExportJob.objects.filter(pk=first["id"]).update(expires_at=timezone.now())
    assert expire_due() == 1
    gone = api.get(first["download"])
    assert (gone.status_code, gone.json()["code"]) == (410, "expired")
    job = ExportJob.objects.get()
    assert not archive_storage().exists(job.storage_key)
    # Expired, the same request builds a new one; a redaction of what it holds deletes it.
    fresh = export_job(api, body, django_capture_on_commit_callbacks)
    assert fresh["id"] != first["id"] and fresh["state"] == "done"
    request = parse({"literal": MARKER}, scope_of_conversation(conversation))
    row = jobs.start(request, via="command")
    assert row.steps["sweep"]["export_archives"] == 1
    assert api.get(fresh["url"]).json()["state"] == "expired"


def test_exports_are_refused_to_others_and_to_bad_input(
    api, other_api, anon_api, user, django_capture_on_commit_callbacks
):
    conversation = _full_conversation(user)
    body = {"conversation_id": conversation.pk}
    assert other_api.post("/api/v1/exports/", body, format="json").status_code == 404
    assert anon_api.post("/api/v1/exports/", body, format="json").status_code == 401
    both = api.post(
        "/api/v1/exports/", {"conversation_id": conversation.pk, "session_id": "x"}, format="json"
    )
    assert (both.status_code, both.json()["code"]) == (400, "invalid")
    assert api.post("/api/v1/exports/", {}, format="json").status_code == 400
    assert AuditEvent.objects.count() == 0 and ExportJob.objects.count() == 0
    job = export_job(api, body, django_capture_on_commit_callbacks)
    assert other_api.get(job["url"]).status_code == 404
    assert other_api.get(job["download"]).status_code == 404
    pending = ExportJob.objects.create(
        id="exp_pending000000000", via="api", actor_id=user.pk, target_kind="conversation",
        target_id=str(conversation.pk),
    )  # fmt: skip
    not_ready = api.get(f"/api/v1/exports/{pending.pk}/archive/")
    assert (not_ready.status_code, not_ready.json()["code"]) == (409, "not_ready")


def test_the_command_writes_the_archive_and_audits(user, tmp_path):
    conversation = _full_conversation(user)
    output = tmp_path / "out.zip"
    call_command(
        "lcm_export_archive", conversation=conversation.pk, output=str(output), as_user="owner"
    )
    archive, manifest = _open(output.read_bytes())
    assert manifest["tables"]["conversations.Message"]["rows"] == 14
    event = AuditEvent.objects.get()
    assert (event.action, event.via, event.actor_name) == ("export", "command", "owner")


def test_a_hard_delete_deletes_the_export_archives_kept_of_it(
    api, user, django_capture_on_commit_callbacks
):
    from security.hard_delete import hard_delete_conversation

    conversation = _full_conversation(user)
    job = export_job(api, {"conversation_id": conversation.pk}, django_capture_on_commit_callbacks)
    key = ExportJob.objects.get().storage_key
    assert archive_storage().exists(key)
    with django_capture_on_commit_callbacks(execute=True):
        hard_delete_conversation(
            conversation=conversation, confirm=str(conversation.pk), via="test"
        )
    assert not archive_storage().exists(key)
    assert api.get(job["url"]).json()["state"] == "expired"
