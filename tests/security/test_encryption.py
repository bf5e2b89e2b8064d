"""Encryption at rest: large-file objects, stream journals and turn event logs."""

from __future__ import annotations

import os
import time

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.core.management import call_command

from core import crypto
from security.models import AuditEvent
from security.storage import EncryptedStorage
from turns import events as E
from turns import journal as J

KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()
SECRET_TEXT = "the quarterly numbers are 42"


@pytest.fixture(autouse=True)
def _no_keys(settings, data_dir):
    settings.LCM_ENCRYPTION_KEY = ""
    settings.LCM_ENCRYPTION_OLD_KEYS = ""


@pytest.fixture
def encrypted_storage(settings, tmp_path):
    settings.STORAGES = {
        **settings.STORAGES,
        "large_files": {
            "BACKEND": "security.storage.EncryptedStorage",
            "OPTIONS": {
                "backend": "django.core.files.storage.FileSystemStorage",
                "options": {"location": str(tmp_path / "large-files")},
            },
        },
    }
    storage = storages["large_files"]
    assert isinstance(storage, EncryptedStorage)
    return storage


def _raw_files(folder) -> bytes:
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())


def test_lines_round_trip_and_clear_lines_pass_through(settings):
    settings.LCM_ENCRYPTION_KEY = KEY
    token = crypto.encrypt_line(b'{"a":1}')
    assert not token.startswith(b"{") and b"\n" not in token
    assert crypto.decrypt_line(token) == b'{"a":1}'
    assert crypto.decrypt_line(b'{"clear":true}') == b'{"clear":true}'


def test_without_a_key_nothing_is_encrypted():
    assert crypto.encrypt_line(b'{"a":1}') == b'{"a":1}'
    assert crypto.encrypt_bytes(b"data") == b"data"
    with pytest.raises(crypto.DecryptionError):
        crypto.decrypt_bytes(crypto.MAGIC + b"garbage")


def test_a_wrong_key_cannot_read(settings):
    settings.LCM_ENCRYPTION_KEY = KEY
    token = crypto.encrypt_line(b'{"a":1}')
    stored = crypto.encrypt_bytes(b"object")
    settings.LCM_ENCRYPTION_KEY = NEW_KEY
    with pytest.raises(crypto.DecryptionError):
        crypto.decrypt_line(token)
    with pytest.raises(crypto.DecryptionError):
        crypto.decrypt_bytes(stored)


def test_a_malformed_key_stops_start_up_naming_the_variable(settings):
    settings.LCM_ENCRYPTION_KEY = "not-a-key"
    with pytest.raises(ImproperlyConfigured, match="LCM_ENCRYPTION_KEY"):
        crypto.validate_configuration()
    settings.LCM_ENCRYPTION_KEY = ""
    settings.LCM_ENCRYPTION_OLD_KEYS = KEY
    with pytest.raises(ImproperlyConfigured, match="LCM_ENCRYPTION_OLD_KEYS"):
        crypto.validate_configuration()


def test_large_file_objects_are_encrypted_on_disk_and_read_back_clear(
    settings, encrypted_storage, tmp_path
):
    from largefiles.store import read_range, write_object

    settings.LCM_ENCRYPTION_KEY = KEY
    write_object("7/01FILE.txt", SECRET_TEXT.encode())
    on_disk = (tmp_path / "large-files" / "7" / "01FILE.txt").read_bytes()
    assert on_disk.startswith(crypto.MAGIC)
    assert SECRET_TEXT.encode() not in on_disk
    assert read_range("7/01FILE.txt", offset=4, limit=9) == SECRET_TEXT.encode()[4:13]
    assert encrypted_storage.size("7/01FILE.txt") == len(SECRET_TEXT.encode())
    with encrypted_storage.open("7/01FILE.txt") as handle:
        assert b"".join(handle.chunks()) == SECRET_TEXT.encode()


def test_objects_stored_before_encryption_stay_readable(settings, encrypted_storage):
    encrypted_storage.save("1/old.txt", ContentFile(b"clear bytes"))
    settings.LCM_ENCRYPTION_KEY = KEY
    assert encrypted_storage.open("1/old.txt").read() == b"clear bytes"


def test_stream_journal_is_encrypted_and_recoverable(settings, tmp_path):
    settings.LCM_ENCRYPTION_KEY = KEY
    journal = J.StreamJournal(step_id="01STEP", provider="anthropic")
    journal.write("lcm.text", {"index": 0, "text": SECRET_TEXT}, shown=SECRET_TEXT)
    journal.close()
    raw = J.journal_path("01STEP").read_bytes()
    assert SECRET_TEXT.encode() not in raw
    assert all(not line.startswith(b"{") for line in raw.splitlines())
    entries = J.read_entries(J.journal_path("01STEP"))
    assert [e["event_type"] for e in entries] == [J.OPEN_EVENT, "lcm.text", J.CLOSE_EVENT]
    assert entries[1]["payload"]["text"] == SECRET_TEXT


def test_a_torn_encrypted_line_is_skipped_like_a_torn_clear_line(settings):
    settings.LCM_ENCRYPTION_KEY = KEY
    journal = J.StreamJournal(step_id="01TORN", provider="anthropic")
    journal.write("lcm.text", {"index": 0, "text": "a"}, shown="a")
    journal.abandon()
    path = J.journal_path("01TORN")
    with open(path, "ab") as handle:
        handle.write(crypto.encrypt_line(b'{"x":1}')[:30])
    assert [e["event_type"] for e in J.read_entries(path)] == [J.OPEN_EVENT, "lcm.text"]


def test_turn_event_log_is_encrypted_and_replayed(settings):
    settings.LCM_ENCRYPTION_KEY = KEY
    channel = E.open_channel("01TURNENC")
    channel.publish("delta", {"text": SECRET_TEXT})
    channel.publish("done", {"ok": True})
    raw = E.events_path("01TURNENC").read_bytes()
    assert SECRET_TEXT.encode() not in raw
    assert [(e.id, e.event, e.data) for e in E.read_log("01TURNENC")] == [
        (1, "delta", {"text": SECRET_TEXT}),
        (2, "done", {"ok": True}),
    ]
    assert E.append_terminal("01TURNENC", "error", {}) is None  # already closed


@pytest.mark.django_db
def test_rotation_re_encrypts_objects_and_streams_under_the_new_key(
    settings, encrypted_storage, tmp_path
):
    from largefiles.store import write_object

    encrypted_storage.save("3/clear.txt", ContentFile(b"was clear"))
    settings.LCM_ENCRYPTION_KEY = KEY
    write_object("3/01OBJ.txt", SECRET_TEXT.encode())
    journal = J.StreamJournal(step_id="01ROT", provider="anthropic")
    journal.write("lcm.text", {"index": 0, "text": SECRET_TEXT}, shown=SECRET_TEXT)
    journal.close()
    old = time.time() - 3600
    os.utime(J.journal_path("01ROT"), (old, old))

    settings.LCM_ENCRYPTION_KEY = NEW_KEY
    settings.LCM_ENCRYPTION_OLD_KEYS = KEY
    call_command("lcm_rotate_key")

    settings.LCM_ENCRYPTION_OLD_KEYS = ""  # the old key is gone: everything still reads
    assert encrypted_storage.open("3/01OBJ.txt").read() == SECRET_TEXT.encode()
    assert encrypted_storage.open("3/clear.txt").read() == b"was clear"
    assert crypto.is_encrypted_bytes(encrypted_storage.read_stored("3/clear.txt"))
    entries = J.read_entries(J.journal_path("01ROT"))
    assert [e["event_type"] for e in entries] == [J.OPEN_EVENT, "lcm.text", J.CLOSE_EVENT]
    assert SECRET_TEXT.encode() not in _raw_files(tmp_path)
    event = AuditEvent.objects.get()
    assert (event.action, event.via, event.details) == (
        "key_rotation",
        "command",
        {
            "objects": 2,
            "journal_files": 1,
            "archive_segments": 0,
            "skipped_busy": 0,
            "unreadable": 0,
        },  # fmt: skip
    )


@pytest.mark.django_db
def test_rotation_skips_a_stream_file_that_may_still_be_written(settings, encrypted_storage):
    settings.LCM_ENCRYPTION_KEY = KEY
    journal = J.StreamJournal(step_id="01LIVE", provider="anthropic")
    before = J.journal_path("01LIVE").read_bytes()
    settings.LCM_ENCRYPTION_KEY = NEW_KEY
    settings.LCM_ENCRYPTION_OLD_KEYS = KEY
    call_command("lcm_rotate_key")
    assert J.journal_path("01LIVE").read_bytes() == before
    assert AuditEvent.objects.get().details["skipped_busy"] == 1
    journal.close()


@pytest.mark.django_db
def test_rotation_leaves_objects_no_key_opens_and_says_so(settings, encrypted_storage, capsys):
    settings.LCM_ENCRYPTION_KEY = KEY
    encrypted_storage.save("5/lost.txt", ContentFile(b"lost key"))
    stored = encrypted_storage.read_stored("5/lost.txt")
    settings.LCM_ENCRYPTION_KEY = NEW_KEY  # KEY is not kept in the old keys
    call_command("lcm_rotate_key")
    assert encrypted_storage.read_stored("5/lost.txt") == stored
    assert "1 objects open with no configured key" in capsys.readouterr().err
    assert AuditEvent.objects.get().details["unreadable"] == 1


@pytest.mark.django_db
def test_rotation_without_a_key_refuses():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="LCM_ENCRYPTION_KEY"):
        call_command("lcm_rotate_key")
    assert AuditEvent.objects.count() == 0
