"""The segment format and its storage.

A segment object is `encrypt_bytes(HEADER + compressed JSON lines)` (clear when no
LCM_ENCRYPTION_KEY is set; core/crypto.py):

    b"LCMSEG1 zstd\n" or b"LCMSEG1 gzip\n"   the format and codec
    {"format": 1, "conversation_id": ..., "seq_from": ..., "seq_to": ...,
     "manifest": [{"id": ..., "seq": ..., "sha256": ...}, ...]}       the first line
    <canonical form of the first message>                            one line each
    ...

A message's canonical form is its columns (all but `archived_in`) plus "parts", the list of
its parts' columns in ordinal order, JSON values with their keys in stored order;
`form_sha256` hashes its sorted-key compact JSON, so the same rows always give the same
hash, and a restore is checked against it.

Objects live in the `archive_segments` storage: `<LCM_DATA_DIR>/archive/` or the S3 bucket
(core/object_storage.py). The file system backend is fsynced after a write.
"""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import hashlib
import json
import os

from django.core.files.base import ContentFile
from django.core.files.storage import storages

from conversations.models import Message, MessagePart
from core import crypto
from core.api.errors import Unavailable

MAGIC = b"LCMSEG1 "
CODECS = ("zstd", "gzip")
ZSTD_LEVEL = 9
GZIP_LEVEL = 9

_MESSAGE_COLUMNS = [f.attname for f in Message._meta.concrete_fields if f.attname != "archived_in"]
_PART_COLUMNS = [f.attname for f in MessagePart._meta.concrete_fields]


class SegmentError(Unavailable):
    """A segment object that is missing, unreadable or does not match its record: a read of
    its content fails with a 503 in the one error shape (never empty content, never a 500);
    `lcm_integrity` reports it with a repair plan (docs/retention.md)."""

    code = "archive_unavailable"


def _plain(value):
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def _canonical_bytes(form: dict) -> bytes:
    return json.dumps(
        form, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain
    ).encode()


def canonical_form(message: Message, parts: list[MessagePart]) -> dict:
    form = {column: getattr(message, column) for column in _MESSAGE_COLUMNS}
    form["parts"] = [{c: getattr(part, c) for c in _PART_COLUMNS} for part in parts]
    # Through JSON once, so a form read back from a segment equals the one built here. Key
    # order is kept (only the hash sorts keys): a JSON column's object (a tool's input)
    # reads back, exports and restores with its keys in the order it was stored in.
    return json.loads(json.dumps(form, separators=(",", ":"), ensure_ascii=False, default=_plain))


def form_sha256(form: dict) -> bytes:
    return hashlib.sha256(_canonical_bytes(form)).digest()


def forms_of(messages: list[Message]) -> list[dict]:
    """Canonical forms of messages read with their parts (two queries for the lot)."""
    parts: dict[int, list[MessagePart]] = {m.pk: [] for m in messages}
    for part in MessagePart.objects.filter(message_id__in=list(parts)).order_by(
        "message_id", "ordinal"
    ):
        parts[part.message_id].append(part)
    return [canonical_form(m, parts[m.pk]) for m in messages]


# -- encoding -----------------------------------------------------------------------------


def compress(raw: bytes, codec: str) -> bytes:
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(raw)
    if codec == "gzip":
        return gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0)
    raise ValueError(f"unknown codec {codec!r}")


def decompress(data: bytes, codec: str) -> bytes:
    if codec == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompress(data)
    if codec == "gzip":
        return gzip.decompress(data)
    raise SegmentError(f"unknown codec {codec!r}")


def encode(payload: dict, *, codec: str) -> tuple[bytes, int]:
    """(the stored object, the size of its JSON before compression). The JSON is lines: the
    header (everything but "messages") first, then one line per message's canonical form, so
    a reader parses only the messages it needs (JSON escapes newlines inside strings)."""
    header = {k: v for k, v in payload.items() if k != "messages"}
    lines = [json.dumps(header, separators=(",", ":"), ensure_ascii=False)]
    lines += [
        json.dumps(form, separators=(",", ":"), ensure_ascii=False, default=_plain)
        for form in payload["messages"]
    ]
    raw = "\n".join(lines).encode()
    body = MAGIC + codec.encode() + b"\n" + compress(raw, codec)
    return crypto.encrypt_bytes(body), len(raw)


class LazySegment:
    """A decoded segment whose message lines are parsed on first use."""

    def __init__(self, header: dict, lines: list[bytes]) -> None:
        self.header = header
        self._lines = lines
        self._parsed: dict[int, dict] = {}
        self.index = {item["id"]: i for i, item in enumerate(header.get("manifest", []))}

    def form(self, message_id: int) -> dict | None:
        found = self._parsed.get(message_id)
        if found is None:
            at = self.index.get(message_id)
            if at is None:
                return None
            found = self._parsed[message_id] = json.loads(self._lines[at])
        return found

    def forms(self) -> list[dict]:
        return [self.form(message_id) for message_id in self.index]


def decode_lazy(data: bytes) -> LazySegment:
    try:
        body = crypto.decrypt_bytes(data)
    except crypto.DecryptionError as error:
        raise SegmentError(str(error)) from None
    if not body.startswith(MAGIC):
        raise SegmentError("not an archive segment")
    header, _, compressed = body.partition(b"\n")
    try:
        raw = decompress(compressed, header[len(MAGIC) :].decode())
        first, *lines = raw.split(b"\n")
        segment = LazySegment(json.loads(first), lines)
    except (OSError, ValueError, EOFError) as error:
        raise SegmentError(f"segment does not decompress: {error}") from None
    if len(segment.index) != len(lines):
        raise SegmentError("segment manifest and messages differ in number")
    return segment


def decode(data: bytes) -> dict:
    """The whole payload: the header's fields and "messages" (every canonical form)."""
    segment = decode_lazy(data)
    try:
        return {**segment.header, "messages": segment.forms()}
    except ValueError as error:
        raise SegmentError(f"segment does not parse: {error}") from None


# -- storage ------------------------------------------------------------------------------


def storage():
    return storages["archive_segments"]


def write(key: str, data: bytes) -> str:
    """Write the object and make it durable (fsync of the file and its folder on the file
    system; an S3 PUT is durable when it returns). Returns the stored name."""
    store = storage()
    name = store.save(key, ContentFile(data))
    try:
        path = store.path(name)
    except NotImplementedError:
        return name
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    folder = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return name


def read(key: str) -> bytes:
    store = storage()
    try:
        with store.open(key, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, OSError) as error:
        raise SegmentError(f"segment {key} cannot be read: {error}") from None


def exists(key: str) -> bool:
    return storage().exists(key)


def delete(key: str) -> None:
    storage().delete(key)
