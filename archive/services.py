"""Archive and restore a range of one conversation's messages (docs/retention.md).

`segment_archive` is one idempotent job, crash-safe at every step:

1. read the range's messages and parts (content still in the database) and hash each
   message's canonical form;
2. write the segment object and fsync it;
3. read it back, decrypt, decompress, and verify the object's and every message's hash
   against the rows;
4. in ONE transaction: record the `Segment` row and clear the content of exactly those
   messages (only if none was archived meanwhile and none is in the active context), then
   their parts' content columns. If any check fails the transaction rolls back, the object
   is deleted, and the content stays in the database.

A crash before 4 commits leaves the content in the database and, at worst, an object that
no row names (reported by `lcm_retention status` as an orphan and removed by `apply`);
after, a verified segment. Running the job again over an archived range does nothing.

`segment_restore` reads and verifies the segment, writes the content back in one
transaction (parts first, while the message is still marked archived, as the triggers of
conversations 0008 require), checks the restored rows hash as archived, and marks the
segment restored.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import ulid
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from archive import faults, segments
from archive.models import Segment, SegmentState
from archive.selectors import forget
from conversations.models import (
    ARCHIVED_PART_COLUMNS,
    ContextItem,
    Conversation,
    Message,
    MessagePart,
)
from core import crypto
from core.api.errors import Conflict
from core.bulk_update import update_rows

log = logging.getLogger(__name__)


@dataclass
class ArchiveResult:
    segment: Segment | None
    archived: int  # messages whose content moved to the segment
    skipped: str = ""  # why nothing was archived


def _in_context():
    return Exists(ContextItem.objects.filter(message_id=OuterRef("pk")))


def segment_archive(
    *, conversation: Conversation, seq_from: int, seq_to: int, codec: str | None = None
) -> ArchiveResult:
    """Archive the messages of `conversation` with seq in [seq_from, seq_to] that are not
    archived yet and not in the active context (the range is shrunk to those; a gap in
    it means a message that must stay, so the range stops before it)."""
    codec = codec or settings.LCM_ARCHIVE_CODEC
    candidates = list(
        Message.objects.filter(conversation=conversation, seq__gte=seq_from, seq__lte=seq_to)
        .annotate(in_context=_in_context())
        .order_by("seq")
    )
    messages: list[Message] = []
    for message in candidates:
        if message.archived_in is not None or message.in_context:
            if messages:
                break
            continue
        messages.append(message)
    if not messages:
        return ArchiveResult(segment=None, archived=0, skipped="nothing to archive")
    forms = segments.forms_of(messages)
    hashes = [segments.form_sha256(form) for form in forms]
    first, last = messages[0].seq, messages[-1].seq
    payload = {
        "format": 1,
        "conversation_id": conversation.pk,
        "seq_from": first,
        "seq_to": last,
        "manifest": [
            {"id": m.pk, "seq": m.seq, "sha256": h.hex()}
            for m, h in zip(messages, hashes, strict=True)
        ],
        "messages": forms,
    }
    data, raw_bytes = segments.encode(payload, codec=codec)
    key = f"{conversation.pk}/{first:012d}-{last:012d}-{ulid.ULID()}.seg".lower()
    key = segments.write(key, data)
    faults.crash_point("written")
    try:
        _verify(key, data, messages, hashes)
        faults.crash_point("verified")
        segment = _record_and_clear(
            conversation=conversation,
            messages=messages,
            key=key,
            codec=codec,
            data=data,
            raw_bytes=raw_bytes,
            hashes=hashes,
        )
    except BaseException:
        segments.delete(key)
        raise
    faults.crash_point("committed")
    return ArchiveResult(segment=segment, archived=len(messages))


def _verify(key: str, data: bytes, messages: list[Message], hashes: list[bytes]) -> None:
    stored = segments.read(key)
    if stored != data:
        raise segments.SegmentError(f"segment {key} read back differs from what was written")
    payload = segments.decode(stored)
    got = [segments.form_sha256(form) for form in payload["messages"]]
    listed = [bytes.fromhex(item["sha256"]) for item in payload["manifest"]]
    ids = [form["id"] for form in payload["messages"]]
    if got != hashes or listed != hashes or ids != [m.pk for m in messages]:
        raise segments.SegmentError(f"segment {key} does not verify against the database")


def _record_and_clear(*, conversation, messages, key, codec, data, raw_bytes, hashes) -> Segment:
    ids = [m.pk for m in messages]
    with transaction.atomic(durable=True):
        segment = Segment.objects.create(
            conversation=conversation,
            seq_from=messages[0].seq,
            seq_to=messages[-1].seq,
            message_count=len(messages),
            key=key,
            codec=codec,
            encrypted=crypto.encryption_enabled(),
            stored_bytes=len(data),
            raw_bytes=raw_bytes,
            sha256=hashlib.sha256(data).hexdigest(),
            message_hashes=b"".join(hashes),
        )
        cleared = (
            Message.objects.filter(pk__in=ids, archived_in__isnull=True)
            .exclude(_in_context())
            .update(archived_in=segment.pk, content="")
        )
        if cleared != len(ids):
            # Another archiver took some of them, or compaction put one back in context.
            raise Conflict(f"range of conversation {conversation.pk} changed while archiving")
        MessagePart.objects.filter(message_id__in=ids).update(
            **dict.fromkeys(ARCHIVED_PART_COLUMNS)
        )
        faults.crash_point("cleared")
    return segment


def segment_restore(*, segment: Segment, delete_object: bool = True) -> int:
    """Bring the segment's content back into the database byte-identical; returns the
    number of messages restored. Idempotent: a restored segment restores nothing."""
    if segment.state != SegmentState.ACTIVE:
        return 0
    data = segments.read(segment.key)
    if hashlib.sha256(data).hexdigest() != segment.sha256:
        raise segments.SegmentError(f"segment {segment.key} does not match its recorded hash")
    payload = segments.decode(data)
    forms = {form["id"]: form for form in payload["messages"]}
    hashes = [bytes(segment.message_hashes)[i : i + 32] for i in range(0, len(forms) * 32, 32)]
    if [segments.form_sha256(f) for f in payload["messages"]] != hashes:
        raise segments.SegmentError(f"segment {segment.key} fails its message hashes")
    faults.crash_point("restore_written")
    with transaction.atomic(durable=True):
        claimed = Segment.objects.filter(pk=segment.pk, state=SegmentState.ACTIVE).update(
            state=SegmentState.RESTORED, restored_at=timezone.now()
        )
        if not claimed:
            return 0
        messages = list(
            Message.objects.filter(archived_in=segment.pk)
            .order_by("seq")
            .values_list("pk", flat=True)
        )
        part_ids = list(
            MessagePart.objects.filter(message_id__in=messages).values_list("pk", flat=True)
        )
        stored_parts = {p["id"]: p for form in forms.values() for p in form["parts"]}
        _restore_rows(
            MessagePart,
            ARCHIVED_PART_COLUMNS,
            [(pk, stored_parts[pk]) for pk in part_ids],
        )
        _restore_rows(
            Message,
            ("content", "archived_in"),
            [(pk, {"content": forms[pk]["content"], "archived_in": None}) for pk in messages],
        )
        restored = segments.forms_of(list(Message.objects.filter(pk__in=messages).order_by("seq")))
        if [segments.form_sha256(f) for f in restored] != hashes[: len(restored)] or len(
            restored
        ) != len(forms):
            raise segments.SegmentError(f"segment {segment.key} did not restore byte-identical")
    forget(segment.pk)
    faults.crash_point("restore_committed")
    if delete_object:
        segments.delete(segment.key)
    return len(messages)


def _restore_rows(model, columns, rows: list[tuple[int, dict]]) -> None:
    """Write the columns back (core.bulk_update), parts before messages, as the triggers
    require."""
    fields = [model._meta.get_field(column) for column in columns]

    def value(field, raw):
        return None if raw is None else field.get_db_prep_save(raw, connection)

    update_rows(
        model._meta.db_table,
        [(f.column, f.db_type(connection)) for f in fields],
        [[value(f, row[f.attname]) for f in fields] + [pk] for pk, row in rows],
        key=("id", model._meta.pk.db_type(connection)),
    )


def segment_mark_missing(*, segment: Segment, actor=None, via: str) -> bool:
    """Record that a segment's object is lost for good (after no replica or backup could
    restore it): its messages keep their rows, reads of their content say it is lost, and
    integrity stops reporting it. Audited. Returns False if it was not active."""
    from core.audit import audit_record

    with transaction.atomic(durable=True):
        marked = Segment.objects.filter(pk=segment.pk, state=SegmentState.ACTIVE).update(
            state=SegmentState.MISSING
        )
        if marked:
            audit_record(
                action="archive.segment_marked_missing",
                via=via,
                actor=actor,
                target_kind="archive_segment",
                target_id=segment.pk,
                details={
                    "conversation_id": segment.conversation_id,
                    "seq_from": segment.seq_from,
                    "seq_to": segment.seq_to,
                    "messages": segment.message_count,
                },
            )
    forget(segment.pk)
    return bool(marked)


@dataclass
class ReencryptResult:
    segments: int = 0  # re-encrypted under the current key
    current: int = 0  # already under it
    unreadable: list[str] | None = None  # no configured key opens them (left as they are)
    changed: int = 0  # restored or re-encrypted by another run meanwhile (left to it)

    def as_dict(self) -> dict:
        return {**self.__dict__, "unreadable": len(self.unreadable or [])}


def segment_reencrypt(*, segment: Segment) -> str:
    """Re-encrypt one active segment under the current key (after a key rotation), never
    leaving the archive without a verified object:

    1. read the object, check its recorded hash, decrypt (any configured key) and encrypt
       under the current key;
    2. write it as a NEW object and fsync it (crash point `reencrypt_written`);
    3. read it back and verify the object and every message's hash;
    4. in one transaction switch the row to the new object (key, hash, size), only if the
       row still names the old one and is active (crash point `reencrypt_switched`);
    5. delete the old object.

    A crash before 4 leaves the row on the old, still valid object, and the new one an
    orphan (`lcm_retention apply` removes orphans); after 4, the old object is the orphan.
    Idempotent: a segment already under the current key is left alone ("current").
    Returns "reencrypted", "current", "unreadable" or "changed"."""
    old_key = segment.key
    stored = _stored_object(segment)
    if stored is None:
        return "changed"  # restored, or re-encrypted by another run, meanwhile
    if not crypto.needs_rotation(stored):
        return "current"
    try:
        data = crypto.rotate_bytes(stored)
    except crypto.DecryptionError:
        return "unreadable"
    stem = old_key.rsplit("-", 1)[0]  # "<conversation>/<first>-<last>"
    new_key = segments.write(f"{stem}-{ulid.ULID()}.seg".lower(), data)
    faults.crash_point("reencrypt_written")
    try:
        _verify_reencrypted(segment, new_key, data)
        switched = _switch_object(segment, old_key, new_key, data)
    except BaseException:
        segments.delete(new_key)
        raise
    if not switched:
        segments.delete(new_key)
        return "changed"
    faults.crash_point("reencrypt_switched")
    forget(segment.pk)
    segments.delete(old_key)
    return "reencrypted"


def _stored_object(segment: Segment) -> bytes | None:
    """The segment's object, checked against its recorded hash; None when it is gone
    because the row moved on (restored, or re-encrypted by another run)."""
    try:
        stored = segments.read(segment.key)
    except segments.SegmentError:
        fresh = Segment.objects.filter(pk=segment.pk).first()
        if fresh is None or fresh.key != segment.key or fresh.state != SegmentState.ACTIVE:
            return None
        raise
    if hashlib.sha256(stored).hexdigest() != segment.sha256:
        raise segments.SegmentError(f"segment {segment.key} does not match its recorded hash")
    return stored


def _verify_reencrypted(segment: Segment, new_key: str, data: bytes) -> None:
    """The new object reads back as written, and its messages hash as the row records."""
    if segments.read(new_key) != data:
        raise segments.SegmentError(f"segment {new_key} read back differs from what was written")
    payload = segments.decode(data)
    hashes = bytes(segment.message_hashes)
    got = b"".join(segments.form_sha256(form) for form in payload["messages"])
    listed = b"".join(bytes.fromhex(item["sha256"]) for item in payload["manifest"])
    if got != hashes or listed != hashes:
        raise segments.SegmentError(f"segment {new_key} does not verify against its row")


def _switch_object(segment: Segment, old_key: str, new_key: str, data: bytes) -> bool:
    """Point the row at the new object, only if it still names the old one and is active."""
    with transaction.atomic(durable=True):
        switched = Segment.objects.filter(
            pk=segment.pk, key=old_key, state=SegmentState.ACTIVE
        ).update(
            key=new_key,
            sha256=hashlib.sha256(data).hexdigest(),
            stored_bytes=len(data),
            encrypted=crypto.is_encrypted_bytes(data),
        )
    return bool(switched)


def segments_reencrypt(*, on_segment=None) -> ReencryptResult:
    """Every active segment under the current key (resumable: run it again after a crash)."""
    result = ReencryptResult(unreadable=[])
    for segment in Segment.objects.filter(state=SegmentState.ACTIVE).order_by("pk").iterator():
        outcome = segment_reencrypt(segment=segment)
        if outcome == "reencrypted":
            result.segments += 1
        elif outcome == "current":
            result.current += 1
        elif outcome == "unreadable":
            result.unreadable.append(segment.key)
        else:
            result.changed += 1
        if on_segment:
            on_segment(segment)
    return result
