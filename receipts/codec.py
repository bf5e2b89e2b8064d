"""A request body as a template: the body's bytes with every stored item's text replaced by
a slot naming the item, and its long literal stretches (a client's system prompt, tool
definitions) by references to content-addressed blobs stored once per conversation. The
template is what a receipt keeps; `rebuild` puts the items' texts (escaped as the body had
them) and the blobs back, byte for byte.

Exactness does not depend on understanding the JSON: a slot replaces bytes that equal the
item's text under the escaper recorded with it, so concatenating the pieces again gives the
body back whatever serializer wrote it. A text found under neither escaper stays literal.
"""

from __future__ import annotations

import bisect
import json
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Texts shorter than this stay in the template (a slot would cost as much as the text).
MIN_TEXT_CHARS = 24
# Literal stretches at least this long go to the blob store; shorter ones stay inline.
BLOB_MIN_BYTES = 256
# A long literal stretch is cut where JSON objects meet, into chunks ending at a piece whose
# CRC has its low bits zero (content-defined, so one changed tool moves one chunk) or at
# this size.
CHUNK_MAX_BYTES = 8192
_CHUNK_MASK = 7
_PIECE_END = re.compile(rb"\},\{")

OP_LITERAL, OP_SLOT, OP_SLOT_ASCII, OP_BLOB = 0, 1, 2, 3
ESCAPERS = (False, True)  # ensure_ascii off (httpx, the SDKs), on (Python's default)


def escaped(text: str, ascii_only: bool) -> bytes:
    """`text` as it stands inside a JSON string (no quotes) under one escaper."""
    return json.dumps(text, ensure_ascii=ascii_only)[1:-1].encode()


@dataclass(frozen=True)
class Slot:
    item: int
    text: int
    ascii_only: bool


@dataclass(frozen=True)
class Blob:
    digest: bytes  # filled in with the row id when stored
    data: bytes


Op = bytes | Slot | Blob


def find_slots(body: bytes, texts: Sequence[tuple[int, int, str]]) -> list[tuple[int, int, Slot]]:
    """Where the items' texts stand in `body`: (start, end, slot), sorted, never
    overlapping; longer texts first, so a message's content wins over a part inside it."""
    taken_starts: list[int] = []
    taken: list[tuple[int, int, Slot]] = []
    ordered = sorted((t for t in texts if len(t[2]) >= MIN_TEXT_CHARS), key=lambda t: -len(t[2]))
    for item, index, text in ordered:
        seen = set()
        for ascii_only in ESCAPERS:
            needle = escaped(text, ascii_only)
            if needle in seen:
                continue
            seen.add(needle)
            start = body.find(needle)
            while start != -1:
                end = start + len(needle)
                at = bisect.bisect_left(taken_starts, start)
                clear = (at == len(taken) or taken[at][0] >= end) and (
                    at == 0 or taken[at - 1][1] <= start
                )
                if clear:
                    taken_starts.insert(at, start)
                    taken.insert(at, (start, end, Slot(item, index, ascii_only)))
                start = body.find(needle, end)
    return taken


def template_of(
    body: bytes, texts: Sequence[tuple[int, int, str]], digest: Callable[[bytes], bytes]
) -> list[Op]:
    """The template of `body`: literal bytes, slots and blobs, in order."""
    ops: list[Op] = []
    cursor = 0
    for start, end, slot in find_slots(body, texts):
        if start > cursor:
            ops.extend(_literal(body[cursor:start], digest))
        ops.append(slot)
        cursor = end
    if cursor < len(body):
        ops.extend(_literal(body[cursor:], digest))
    return ops


def _literal(gap: bytes, digest: Callable[[bytes], bytes]) -> list[Op]:
    if len(gap) < BLOB_MIN_BYTES:
        return [gap]
    out: list[Op] = []
    for chunk in _chunks(gap):
        if len(chunk) >= BLOB_MIN_BYTES:
            out.append(Blob(digest(chunk), chunk))
        elif out and isinstance(out[-1], bytes):
            out[-1] += chunk
        else:
            out.append(chunk)
    return out


def _chunks(gap: bytes) -> list[bytes]:
    chunks, start, piece_start = [], 0, 0
    for match in _PIECE_END.finditer(gap):
        cut = match.start() + 2  # after "},"
        piece = gap[piece_start:cut]
        piece_start = cut
        if (zlib.crc32(piece) & _CHUNK_MASK) == 0 or cut - start >= CHUNK_MAX_BYTES:
            chunks.append(gap[start:cut])
            start = cut
    chunks.append(gap[start:])
    return [c for c in chunks if c]


# The template's binary form: an op byte, then its arguments as unsigned varints.


def write_varint(value: int, out: bytearray) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def encode_template(ops: Sequence[Op], blob_ids: dict[bytes, int]) -> bytes:
    out = bytearray()
    for op in ops:
        if isinstance(op, bytes):
            out.append(OP_LITERAL)
            write_varint(len(op), out)
            out += op
        elif isinstance(op, Slot):
            out.append(OP_SLOT_ASCII if op.ascii_only else OP_SLOT)
            write_varint(op.item, out)
            write_varint(op.text, out)
        else:
            out.append(OP_BLOB)
            write_varint(blob_ids[op.digest], out)
    return bytes(out)


@dataclass(frozen=True)
class SlotRef:
    item: int
    text: int
    ascii_only: bool


@dataclass(frozen=True)
class BlobRef:
    blob_id: int


def decode_template(data: bytes) -> list[bytes | SlotRef | BlobRef]:
    ops: list[bytes | SlotRef | BlobRef] = []
    at = 0
    while at < len(data):
        code = data[at]
        at += 1
        if code == OP_LITERAL:
            size, at = read_varint(data, at)
            ops.append(data[at : at + size])
            at += size
        elif code in (OP_SLOT, OP_SLOT_ASCII):
            item, at = read_varint(data, at)
            text, at = read_varint(data, at)
            ops.append(SlotRef(item, text, code == OP_SLOT_ASCII))
        elif code == OP_BLOB:
            blob_id, at = read_varint(data, at)
            ops.append(BlobRef(blob_id))
        else:
            raise ValueError(f"unknown template op {code}")
    return ops


def rebuild(
    ops: Sequence[bytes | SlotRef | BlobRef],
    texts: Callable[[int, int], str | None],
    blobs: dict[int, bytes],
    missing: Callable[[SlotRef], bytes],
) -> tuple[bytes, list[tuple[int, int, int]]]:
    """The body again: each slot's text escaped as recorded (`missing(slot)` when the item
    or its text is gone), each blob's bytes; and where each slot stands, as
    (start, end, item)."""
    out = bytearray()
    spans = []
    for op in ops:
        if isinstance(op, bytes):
            out += op
        elif isinstance(op, SlotRef):
            text = texts(op.item, op.text)
            start = len(out)
            out += missing(op) if text is None else escaped(text, op.ascii_only)
            spans.append((start, len(out), op.item))
        else:
            out += blobs[op.blob_id]
    return bytes(out), spans


def slot_order(ops: Sequence[bytes | SlotRef | BlobRef]) -> list[int]:
    """The items in the order their slots stand in the body (first appearance)."""
    seen: dict[int, None] = {}
    for op in ops:
        if isinstance(op, SlotRef):
            seen.setdefault(op.item)
    return list(seen)
