"""A receipt's manifest: a small JSON header (items as columns, parameters, cache marks,
budget, what was left out, what came back) and the body's template, compressed together
with zstd. Item ids are stored as differences from the previous integer id, reasons and
kinds as one letter each, hashes as four hex digits: a consecutive run of messages costs a
few bytes an item after compression.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field

import zstandard

from receipts import codec

FORMAT = 1
KIND_CODES = {"message": "m", "summary": "s", "state": "f", "chunk": "c", "blob": "b"}
REASON_CODES = {
    "tail": "T",
    "history": "H",
    "summary": "S",
    "pinned": "P",
    "state": "F",
    "retrieved": "R",
    "tool_loop": "L",
    "input": "I",
    "source": "O",
    "expansion": "E",
    "librarian": "B",
}
_KINDS = {v: k for k, v in KIND_CODES.items()}
_REASONS = {v: k for k, v in REASON_CODES.items()}
_LEVEL = 9
# A raw-content dictionary of what every manifest repeats: the header's keys and the JSON
# skeletons of the wires' bodies. Both ends of the compression use it, so it is part of
# the format: never edit it; a new one comes with a new FORMAT (kept for older receipts).
_DICTIONARY_V1 = (
    b'{"d":"","u":"http://127.0.0.1:","u":"offline","c":[0],"b":{"input_limit":,"lcm_room":'
    b'"tokens":},"q":"","o":{"strategy":"lcm"},"o":{"strategy":"state"},"o":{"wire":"anthropic",'
    b'"compacted":false},"o":{"wire":"openai","compacted":true},"o":{"level":"normal"},'
    b'"b":{"target_tokens":,"depth":0},"r":"end_turn","r":"tool_use","r":"stop","r":"max_tokens",'
    b'"e":"","us":,"v":1,"i":{"k":"mmmmmmmmmmmmmmmm","id":[1,1,1,1,1,1,1,1],"t":[],"h":"","r":'
    b'"IIIIIIIIIIIIIIII","HHHHHHHHTTTTTTTT","SSSS","OOOOOOOO","s":{},"ko":{}},"l":{"m":[[]]}}'
    b'{"model":"","max_tokens":,"system":[{"type":"text","text":"","cache_control":{"type":'
    b'"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":""},{"type":'
    b'"tool_result","tool_use_id":"toolu_","content":"","is_error":false}]},{"role":"assistant",'
    b'"content":[{"type":"text","text":""},{"type":"tool_use","id":"toolu_","name":"","input":{}}'
    b']}],"tools":[{"name":"","description":"","input_schema":{"type":"object","properties":{'
    b'"stream":true,"tool_choice":{"type":"auto"},"metadata":{"user_id":""}'
    b'{"model":"","messages":[{"role":"system","content":""},{"role":"user","content":""},{"role":'
    b'"assistant","content":""}],"max_completion_tokens":,"stream":true,"stream_options":'
    b'{"include_usage":true}}{"model":"","input":[{"role":"user","content":[{"type":"input_text",'
    b'"text":""}]},{"role":"assistant","content":[{"type":"output_text","text":""}]}],'
    b'"instructions":"","max_output_tokens":,"prompt_cache_key":"lcm-branch-","store":false,'
    b'"parallel_tool_calls":true}{"model":"offline","system":"","messages":[{"role":"user",'
    b'"blocks":[{"type":"text","text":"","annotations":[]}],"rendered_text":""},{"role":'
    b'"assistant","blocks":[{"type":"text","text":"","annotations":[]}],"rendered_text":""}],'
    b'"tools":[],"max_output_tokens":1024}'
)
_local = threading.local()
_DICTIONARIES = {
    1: zstandard.ZstdCompressionDict(_DICTIONARY_V1, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
}


@dataclass
class Item:
    kind: str
    id: int | str
    reason: str
    tokens: int
    hash: str  # four hex digits of the texts at the call (receipts.items.short_hash)
    score: float | None = None


@dataclass
class Manifest:
    header: dict
    items: list[Item]
    template: bytes  # codec.encode_template
    left_out: list[tuple[str, int | str]] = field(default_factory=list)


def _ids_out(ids: list) -> list:
    out, last = [], 0
    for value in ids:
        if isinstance(value, int):
            out.append(value - last)
            last = value
        else:
            out.append(value)
    return out


def _ids_in(stored: list) -> list:
    out, last = [], 0
    for value in stored:
        if isinstance(value, int):
            last += value
            out.append(last)
        else:
            out.append(value)
    return out


def _ranges(refs: list[tuple[str, int | str]]) -> dict:
    """Left-out items by kind; integer ids as [first, last] runs."""
    by_kind: dict[str, list] = {}
    for kind, item_id in refs:
        by_kind.setdefault(KIND_CODES.get(kind, kind), []).append(item_id)
    out: dict[str, list] = {}
    for code, ids in by_kind.items():
        runs: list = []
        for value in ids:
            extends = isinstance(value, int) and runs and isinstance(runs[-1], list)
            if extends and value == runs[-1][1] + 1:
                runs[-1][1] = value
                continue
            runs.append([value, value] if isinstance(value, int) else value)
        out[code] = runs
    return out


def _unranges(stored: dict) -> list[tuple[str, int | str]]:
    out = []
    for code, runs in stored.items():
        kind = _KINDS.get(code, code)
        for run in runs:
            if isinstance(run, list):
                out.extend((kind, i) for i in range(run[0], run[1] + 1))
            else:
                out.append((kind, run))
    return out


def encode(manifest: Manifest) -> bytes:
    items = manifest.items
    header = dict(manifest.header)
    header["i"] = {
        "k": "".join(KIND_CODES.get(i.kind, "?") for i in items),
        "id": _ids_out([i.id for i in items]),
        "t": [i.tokens for i in items],
        "h": "".join(i.hash for i in items),
        "r": "".join(REASON_CODES.get(i.reason, "H") for i in items),
    }
    other = {n: i.kind for n, i in enumerate(items) if i.kind not in KIND_CODES}
    if other:
        header["i"]["ko"] = other
    scores = {n: round(i.score, 4) for n, i in enumerate(items) if i.score is not None}
    if scores:
        header["i"]["s"] = scores
    if manifest.left_out:
        header["l"] = _ranges(manifest.left_out)
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    size = bytearray()
    codec.write_varint(len(raw), size)
    compressor = getattr(_local, "compressor", None)
    if compressor is None:  # one per thread: a compressor is not shared between threads
        compressor = _local.compressor = zstandard.ZstdCompressor(
            level=_LEVEL,
            dict_data=_DICTIONARIES[FORMAT],
            write_checksum=False,
            write_dict_id=False,
        )
    return bytes([FORMAT]) + compressor.compress(bytes(size) + raw + manifest.template)


def decode(data: bytes) -> Manifest:
    data = bytes(data)
    plain = zstandard.ZstdDecompressor(dict_data=_DICTIONARIES[data[0]]).decompress(data[1:])
    size, at = codec.read_varint(plain, 0)
    header = json.loads(plain[at : at + size])
    template = plain[at + size :]
    columns = header.pop("i")
    kinds = [_KINDS.get(c, "?") for c in columns["k"]]
    for n, kind in (columns.get("ko") or {}).items():
        kinds[int(n)] = kind
    scores = {int(n): s for n, s in (columns.get("s") or {}).items()}
    ids = _ids_in(columns["id"])
    hashes = columns["h"]
    items = [
        Item(
            kind=kinds[n],
            id=ids[n],
            reason=_REASONS.get(columns["r"][n], "history"),
            tokens=columns["t"][n],
            hash=hashes[4 * n : 4 * n + 4],
            score=scores.get(n),
        )
        for n in range(len(kinds))
    ]
    left_out = _unranges(header.pop("l", {}))
    return Manifest(header=header, items=items, template=template, left_out=left_out)
