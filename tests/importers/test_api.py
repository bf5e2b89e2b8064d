"""POST /api/v1/imports/ runs the import as a background job (synchronous queue here);
GET /api/v1/imports/{id}/ shows its state, progress, report and per-line errors."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations.models import Conversation, Message
from importers.jobs import import_job_run, upload_dir
from importers.models import ImportJob
from tests.importers.conftest import FIXTURES


@pytest.fixture
def post(api, django_capture_on_commit_callbacks):
    """POST an upload and run what the view queued on commit (the job, synchronously)."""

    def send(data, client=None):
        with django_capture_on_commit_callbacks(execute=True):
            return (client or api).post("/api/v1/imports/", data, format="multipart")

    return send


def _upload(name: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, (FIXTURES / name).read_bytes())


def test_an_uploaded_transcript_is_imported_by_a_job_with_progress_and_line_errors(
    api, user, sync_jobs, post
):
    response = post({"file": _upload("generic.jsonl"), "format": "jsonl", "session_id": "uploaded"})
    assert response.status_code == 202, response.json()
    job_id = response.json()["id"]
    detail = api.get(f"/api/v1/imports/{job_id}/").json()
    assert detail["state"] == "succeeded"
    assert detail["progress"] == {"done": 6, "total": 6}  # records read, refused ones too
    assert [e["line"] for e in detail["errors"]] == [6, 7]
    assert detail["result"]["totals"]["messages"] == 5
    conversation = Conversation.objects.get(owner=user, session_id="uploaded")
    assert Message.objects.filter(conversation=conversation).count() == 5
    assert list(upload_dir().iterdir()) == []  # the upload is removed after the job


def test_a_lossless_claw_upload_imports_with_missing_files_reported(
    api, user, sync_jobs, lc_fixture, post
):
    upload = SimpleUploadedFile("lcm.db", (lc_fixture / "lcm.db").read_bytes())
    response = post({"file": upload, "format": "lossless-claw"})
    assert response.status_code == 202
    detail = api.get(f"/api/v1/imports/{response.json()['id']}/").json()
    assert detail["state"] == "succeeded"
    assert detail["result"]["totals"]["messages"] == 720
    codes = [p["code"] for c in detail["result"]["conversations"] for p in c["problems"]]
    assert codes == ["file_missing"]


def test_a_bad_format_is_refused_and_nothing_is_stored(api, user, post):
    response = post({"file": _upload("generic.jsonl"), "format": "csv"})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert response.json()["extra"] == {"field": "format"}
    assert ImportJob.objects.count() == 0
    assert Conversation.objects.count() == 0


def test_an_unreadable_upload_fails_the_job_with_a_message(api, user, sync_jobs, post):
    upload = SimpleUploadedFile("x.json", b"{not json")
    response = post({"file": upload, "format": "anthropic"})
    detail = api.get(f"/api/v1/imports/{response.json()['id']}/").json()
    assert detail["state"] == "failed"
    assert detail["error"].startswith("upload.json is not valid JSON (line 1)")
    assert Conversation.objects.count() == 0


def test_another_users_import_is_not_found(api, other_api, user, sync_jobs, post):
    response = post({"file": _upload("generic.jsonl"), "format": "jsonl"})
    job_id = response.json()["id"]
    assert other_api.get(f"/api/v1/imports/{job_id}/").status_code == 404
    assert other_api.get("/api/v1/imports/999999/").json()["code"] == "not_found"


def test_a_job_runs_once(api, user, settings, post):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": False}
    from django_q.models import OrmQ

    response = post({"file": _upload("generic.jsonl"), "format": "jsonl"})
    job_id = response.json()["id"]
    assert response.json()["state"] == "pending"
    assert OrmQ.objects.count() == 1
    assert import_job_run(job_id=job_id).state == "succeeded"
    assert import_job_run(job_id=job_id) is None  # claimed already: a no-op
    assert Message.objects.count() == 5


def test_an_uploaded_database_cannot_make_the_server_read_its_own_files(
    api, user, sync_jobs, lc_copy, tmp_path, post
):
    import sqlite3

    from importers.models import ImportedFile

    secret = tmp_path / "server-secret.txt"
    secret.write_text("do not leak")
    db = sqlite3.connect(lc_copy)
    db.execute("UPDATE large_files SET storage_uri = ?", [str(secret)])
    db.commit()
    db.close()
    upload = SimpleUploadedFile("lcm.db", lc_copy.read_bytes())
    response = post({"file": upload, "format": "lossless-claw"})
    detail = api.get(f"/api/v1/imports/{response.json()['id']}/").json()
    codes = [p["code"] for c in detail["result"]["conversations"] for p in c["problems"]]
    assert codes == ["file_missing"]
    assert ImportedFile.objects.get().missing is True


def test_a_files_dir_path_never_escapes_the_directory(tmp_path):
    from importers.losslessclaw.files import resolve_file

    base = tmp_path / "files"
    base.mkdir()
    (tmp_path / "outside.txt").write_text("outside")
    found = resolve_file(
        "x/../outside.txt", db_path=tmp_path / "lcm.db", files_dir=base, trust_paths=False
    )
    assert found.data is None
    (base / "1").mkdir()
    (base / "1" / "file_0000000000000001.txt").write_text("inside")
    found = resolve_file(
        "/home/agent/.openclaw/lcm-files/1/file_0000000000000001.txt",
        db_path=tmp_path / "lcm.db",
        files_dir=base,
        trust_paths=False,
    )
    assert found.data == b"inside"
