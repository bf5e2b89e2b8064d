"""Key rotation re-encrypts archive segments (archive.services.segment_reencrypt): a new
object, read back and verified, then the row switched to it in one transaction, then the
old object deleted. Idempotent and resumable; a real `manage.py lcm_rotate_key` process
killed in the middle loses nothing."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from archive import segments
from archive.models import Segment
from archive.selectors import forget
from archive.services import segment_archive, segment_reencrypt, segment_restore
from conversations.archive_port import hydrate_messages
from conversations.models import Message
from core import crypto
from retention.services import orphan_objects, orphans_remove
from security.models import AuditEvent
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag
from tests.turns.live import ROOT, child_env

KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()


@pytest.fixture(autouse=True)
def _keys(settings, tmp_path):
    settings.DATA_DIR = tmp_path
    settings.LCM_ENCRYPTION_KEY = KEY
    settings.LCM_ENCRYPTION_OLD_KEYS = ""


def _read(conversation) -> list[dict]:
    forget()
    messages = hydrate_messages(
        Message.objects.filter(conversation=conversation).prefetch_related("parts").order_by("seq")
    )
    return [
        segments.canonical_form(m, sorted(m.parts.all(), key=lambda p: p.ordinal)) for m in messages
    ]


def _archived(conversation) -> tuple[Segment, list[dict]]:
    append_messages(conversation, 30)
    build_dag(conversation, leaf_size=8, fanout=3, max_depth=1, tail=6)
    before = segments.forms_of(list(Message.objects.filter(conversation=conversation)
                                    .order_by("seq")))  # fmt: skip
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=24).segment
    assert segment.encrypted
    return segment, before


def _opens_with(key: str, data: bytes) -> bool:
    try:
        Fernet(key.encode()).decrypt(data[len(crypto.MAGIC) :])
    except Exception:  # noqa: BLE001 - InvalidToken
        return False
    return True


def test_rotation_re_encrypts_segments_under_the_new_key(conversation, settings):
    segment, before = _archived(conversation)
    old_key = segment.key
    settings.LCM_ENCRYPTION_KEY, settings.LCM_ENCRYPTION_OLD_KEYS = NEW_KEY, KEY

    call_command("lcm_rotate_key")

    segment.refresh_from_db()
    assert segment.key != old_key and not segments.exists(old_key)
    data = segments.read(segment.key)
    assert (_opens_with(NEW_KEY, data), _opens_with(KEY, data)) == (True, False)
    assert segment.stored_bytes == len(data)
    settings.LCM_ENCRYPTION_OLD_KEYS = ""  # the old key dropped: the archive still reads
    assert _read(conversation) == before
    [event] = AuditEvent.objects.filter(action="key_rotation")
    assert event.details["archive_segments"] == 1
    # Idempotent: a second run finds it under the current key.
    assert segment_reencrypt(segment=segment) == "current"
    call_command("lcm_rotate_key")
    segment.refresh_from_db()
    assert segments.read(segment.key) == data
    assert orphan_objects() == []


def test_a_segment_stored_in_clear_gets_encrypted(conversation, settings):
    settings.LCM_ENCRYPTION_KEY = ""
    append_messages(conversation, 30)
    build_dag(conversation, leaf_size=8, fanout=3, max_depth=1, tail=6)
    before = _read(conversation)
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=24).segment
    assert not segment.encrypted
    settings.LCM_ENCRYPTION_KEY = KEY

    assert segment_reencrypt(segment=segment) == "reencrypted"

    segment.refresh_from_db()
    assert segment.encrypted and crypto.is_encrypted_bytes(segments.read(segment.key))
    assert _read(conversation) == before


def test_a_segment_no_configured_key_opens_is_left_as_it_is(conversation, settings):
    segment, _ = _archived(conversation)
    settings.LCM_ENCRYPTION_KEY = NEW_KEY  # KEY forgotten

    assert segment_reencrypt(segment=segment) == "unreadable"

    assert Segment.objects.get(pk=segment.pk).key == segment.key
    assert segments.exists(segment.key) and orphan_objects() == []


def test_a_segment_restored_or_switched_meanwhile_is_left_to_the_other(conversation, settings):
    segment, before = _archived(conversation)
    stale = Segment.objects.get(pk=segment.pk)
    settings.LCM_ENCRYPTION_KEY, settings.LCM_ENCRYPTION_OLD_KEYS = NEW_KEY, KEY
    assert segment_reencrypt(segment=segment) == "reencrypted"

    assert segment_reencrypt(segment=stale) == "changed"  # its object is gone, the row moved

    segment.refresh_from_db()
    assert segment_restore(segment=segment) == 24
    assert segment_reencrypt(segment=segment) == "changed"
    assert _read(conversation) == before
    assert orphan_objects() == []


def test_a_tampered_segment_is_refused_and_kept(conversation, settings):
    segment, _ = _archived(conversation)
    path = segments.storage().path(segment.key)
    with open(path, "ab") as handle:
        handle.write(b"x")
    settings.LCM_ENCRYPTION_KEY, settings.LCM_ENCRYPTION_OLD_KEYS = NEW_KEY, KEY

    with pytest.raises(segments.SegmentError, match="recorded hash"):
        segment_reencrypt(segment=segment)

    assert Segment.objects.get(pk=segment.pk).key == segment.key
    assert orphan_objects() == []


def _rotate(tmp_path, crash_at: str | None = None):
    env = child_env(LCM_DATA_DIR=str(tmp_path), LCM_ENCRYPTION_KEY=NEW_KEY,
                    LCM_ENCRYPTION_OLD_KEYS=KEY)  # fmt: skip
    env.pop("LCM_ARCHIVE_CRASH_AT", None)
    if crash_at:
        env["LCM_ARCHIVE_CRASH_AT"] = crash_at
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), "lcm_rotate_key"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("step", ["reencrypt_written", "reencrypt_switched"])
def test_a_rotation_killed_in_the_middle_loses_nothing(conversation, settings, tmp_path,
                                                       archive_folder, step):  # fmt: skip
    settings.STORAGES["archive_segments"]["OPTIONS"]["location"] = str(tmp_path / "archive")
    segment, before = _archived(conversation)
    old_key = segment.key

    crashed = _rotate(tmp_path, crash_at=step)

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    segment.refresh_from_db()
    settings.LCM_ENCRYPTION_KEY, settings.LCM_ENCRYPTION_OLD_KEYS = NEW_KEY, KEY
    assert _read(conversation) == before
    if step == "reencrypt_written":  # the row still names the old, valid object
        assert segment.key == old_key
        [orphan] = orphan_objects()
        assert orphan != old_key
    else:  # the row names the new, verified object; the old one is the orphan
        assert segment.key != old_key and _opens_with(NEW_KEY, segments.read(segment.key))
        assert orphan_objects() == [old_key]
    again = _rotate(tmp_path)
    assert again.returncode == 0, again.stderr
    segment.refresh_from_db()
    assert _opens_with(NEW_KEY, segments.read(segment.key))
    assert orphans_remove(older_than=dt.timedelta(0)) == 1
    assert orphan_objects() == []
    settings.LCM_ENCRYPTION_OLD_KEYS = ""
    assert _read(conversation) == before


def test_a_reader_holding_the_old_row_reads_the_new_object(conversation, settings):
    from archive.selectors import segment_forms

    segment, before = _archived(conversation)
    stale = Segment.objects.get(pk=segment.pk)
    settings.LCM_ENCRYPTION_KEY, settings.LCM_ENCRYPTION_OLD_KEYS = NEW_KEY, KEY
    assert segment_reencrypt(segment=segment) == "reencrypted"
    forget()

    forms = segment_forms(stale)

    assert [forms[f["id"]] for f in before[:24]] == before[:24]
