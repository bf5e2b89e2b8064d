"""How a vector blob is stored, and the ONE decoder every reader uses (docs/retention.md).

- `float32`: the plain form every embedding is written in: `dim` little-endian float32, no
  header (4 x dim bytes).
- `float16` and `int8`: the compressed forms retention may give the vectors of archived
  content. Both start with a 4-byte header, `b"LV"` + a format code + a version byte:
  `float16` is followed by `dim` little-endian float16 (4 + 2 x dim bytes); `int8` by one
  float32 scale and `dim` signed bytes, value = byte x scale (8 + dim bytes).

A compressed blob is never 4 x dim bytes long for any dim except one (`float16` at dim 2),
and there the header decides: a float32 vector whose first component is the 4 header bytes
read as a float (a denormal near 1e-38) does not occur in an L2-normalised embedding.

Decoding yields float32 either way. The compressed forms are lossy (float16 keeps ~3
significant digits, int8 ~2): vectors are derived data, re-derivable from the text by a
re-index (`manage.py lcm_memory reindex`).
"""

from __future__ import annotations

import numpy as np

FLOAT32, FLOAT16, INT8 = "float32", "float16", "int8"
FORMATS = (FLOAT32, FLOAT16, INT8)
_MAGIC = b"LV"
_VERSION = 1
_CODES = {FLOAT16: 16, INT8: 8}
_NAMES = {code: name for name, code in _CODES.items()}
_HEADER = 4


class VectorFormatError(ValueError):
    """A blob that is no vector of this dimension in any known format."""


def stored_length(fmt: str, dim: int) -> int:
    """Bytes a vector of `dim` components takes in `fmt`."""
    return {FLOAT32: 4 * dim, FLOAT16: _HEADER + 2 * dim, INT8: _HEADER + 4 + dim}[fmt]


def vector_format(blob: bytes, dim: int) -> str:
    blob = bytes(blob)
    if len(blob) >= _HEADER and blob[:2] == _MAGIC and blob[3] == _VERSION:
        name = _NAMES.get(blob[2])
        if name is not None and len(blob) == stored_length(name, dim):
            return name
    if len(blob) == 4 * dim:
        return FLOAT32
    raise VectorFormatError(f"a blob of {len(blob)} bytes is no {dim}-dimensional vector")


def encode_vector(vector: np.ndarray, fmt: str = FLOAT32) -> bytes:
    vector = np.asarray(vector, dtype=np.float32)
    if fmt == FLOAT32:
        return vector.astype("<f4").tobytes()
    header = _MAGIC + bytes([_CODES[fmt], _VERSION])
    if fmt == FLOAT16:
        return header + vector.astype("<f2").tobytes()
    if fmt == INT8:
        peak = float(np.max(np.abs(vector))) if vector.size else 0.0
        scale = peak / 127.0 if peak > 0 else 1.0
        quantised = np.clip(np.rint(vector / scale), -127, 127).astype(np.int8)
        return header + np.float32(scale).astype("<f4").tobytes() + quantised.tobytes()
    raise VectorFormatError(f"unknown vector format {fmt!r}")


def decode_vector(blob: bytes, dim: int) -> np.ndarray:
    """The float32 vector a stored blob holds, whatever its format."""
    blob = bytes(blob)
    fmt = vector_format(blob, dim)
    if fmt == FLOAT32:
        return np.frombuffer(blob, dtype="<f4").astype(np.float32, copy=False)
    if fmt == FLOAT16:
        return np.frombuffer(blob, dtype="<f2", offset=_HEADER).astype(np.float32)
    scale = np.frombuffer(blob, dtype="<f4", count=1, offset=_HEADER)[0]
    return np.frombuffer(blob, dtype=np.int8, offset=_HEADER + 4).astype(np.float32) * scale


def decode_vectors(blobs, dim: int) -> np.ndarray:
    """(len(blobs), dim) float32: one buffer when every blob is plain float32 (the common
    case, and what made a 100k cache fill fast), else row by row."""
    blobs = [bytes(b) for b in blobs]
    plain = 4 * dim
    if all(len(b) == plain and b[:2] != _MAGIC for b in blobs):
        block = np.frombuffer(b"".join(blobs), dtype="<f4").astype(np.float32, copy=False)
        return block.reshape(len(blobs), dim)
    out = np.empty((len(blobs), dim), dtype=np.float32)
    for i, blob in enumerate(blobs):
        out[i] = decode_vector(blob, dim)
    return out


def recode_vector(blob: bytes, dim: int, fmt: str) -> bytes:
    """The blob in `fmt` (through float32)."""
    return encode_vector(decode_vector(blob, dim), fmt)
