"""The MiniLM ONNX graph on disk: built once from the installed weights, kept under the
data directory (LCM_DATA_DIR/models/), checked against its hash before every load.

The file name carries a key derived from everything the bytes depend on (the weights'
SHA-256, the graph version, the variant, the onnx and onnxruntime versions), so a new
wheel or a changed builder makes a new file instead of reusing a stale one. Beside it, a
`.sha256` file records the graph's own hash, written after the graph: a file that does not
match it (a crash mid-write, a truncated copy, an edit) is rebuilt. Writes go to a
temporary file renamed into place, so concurrent processes never read half a graph.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path

from django.conf import settings

from memory.embeddings.minilm_files import MODEL_NAME, load_weights, weights_path
from memory.embeddings.minilm_graph import GRAPH_VERSION, build_model

logger = logging.getLogger("lcm.memory")

VARIANTS = ("fp32", "int8")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_dir() -> Path:
    return Path(settings.DATA_DIR) / "models"


def graph_path(variant: str) -> Path:
    """Where the variant's graph lives for the installed weights and libraries. The
    versions come from the installed distributions: a process that finds its graph built
    never imports `onnx` (12 MB resident it would keep for nothing)."""
    from importlib.metadata import version

    key = hashlib.sha256(
        "|".join(
            [_sha256(weights_path()), str(GRAPH_VERSION), variant, version("onnx")]
            + ([version("onnxruntime")] if variant == "int8" else [])
        ).encode()
    ).hexdigest()[:16]
    return cache_dir() / f"{MODEL_NAME}-{variant}-{key}.onnx"


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _not_preprocessing_advice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Please consider to run pre-processing")


@contextlib.contextmanager
def _quiet_root_warnings():
    """The quantizer logs advice straight on the root logger ("Please consider to run
    pre-processing before quantization", meant for image models): filtered out there while
    it runs. A filter on the root logger sees only records logged on it, not our own."""
    root = logging.getLogger()
    root.addFilter(_not_preprocessing_advice)
    try:
        yield
    finally:
        root.removeFilter(_not_preprocessing_advice)


def _build(variant: str) -> bytes:
    fp32 = build_model(load_weights()).SerializeToString()
    if variant == "fp32":
        return fp32
    # Dynamic int8: weights of the dense layers quantized per output channel (per-tensor
    # scales cost far more accuracy: docs/memory.md), activations at run time.
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as work, _quiet_root_warnings():
        source, target = Path(work) / "fp32.onnx", Path(work) / "int8.onnx"
        source.write_bytes(fp32)
        quantize_dynamic(
            source,
            target,
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],
            extra_options={"DefaultTensorType": 1},  # float: fused ops have no inferred type
        )
        return target.read_bytes()


def ensure_graph(variant: str = "fp32") -> Path:
    """The path of a verified graph for `variant`, building it first if needed."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown MiniLM graph variant {variant!r}")
    path = graph_path(variant)
    manifest = path.with_name(path.name + ".sha256")
    if path.exists() and manifest.exists():
        if _sha256(path) == manifest.read_text().strip():
            return path
        logger.warning("cached embedding graph %s does not match its hash: rebuilding", path)
    logger.info("building the %s embedding graph (%s) under %s", MODEL_NAME, variant, path.parent)
    data = _build(variant)
    _write_atomically(path, data)
    _write_atomically(manifest, (hashlib.sha256(data).hexdigest() + "\n").encode())
    return path
