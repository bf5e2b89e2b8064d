"""all-MiniLM-L6-v2 run by ONNX Runtime on the CPU (the default MiniLM backend).

The graph is built from the installed weights and cached under the data directory
(memory/embeddings/minilm_cache.py); nothing is downloaded. Texts are tokenized, sorted by
length and padded per batch, so a batch of short chat messages is not padded to the length
of a tool output. One intra-op thread per session by default: on cores shared with web
processes, workers and the database, extra threads mostly wait for each other (the same
reason memory/embeddings/blas.py gives numpy one BLAS thread; measured in docs/memory.md).

`int8` is the dynamically quantized graph: faster, close to but not the same vectors, so it
is its own model name (and so its own namespace); fp32 gives numpy's vectors within the
tolerance tests/memory/test_minilm_onnx.py checks, under the same name.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

import numpy as np

from memory.embeddings.minilm_files import (
    DIM,
    MODEL_NAME,
    length_sorted_batches,
    load_tokenizer,
    padded,
)

BATCH = 32
# The runtime's SkipLayerNormalization fusion would put back the slow kernel the graph
# avoids (memory/embeddings/minilm_graph.py, `_layer`).
DISABLED_FUSIONS = ["SkipLayerNormFusion"]


def _libc_trim():
    """glibc's malloc_trim, or None elsewhere. Without the arena the runtime's activations
    come from malloc, and glibc keeps a long batch's freed buffers in the heap for the life
    of the process (measured: +270 MB resident after one batch of 32 x 256 tokens, +143 MB
    once trimmed); trimming after each call hands them back."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _libc_trim()


def model_name(variant: str) -> str:
    return MODEL_NAME if variant == "fp32" else f"{MODEL_NAME}-{variant}"


class MiniLMOnnx:
    dim = DIM
    # Raw cosine -> calibrated similarity (docs/memory.md): the same model as numpy's.
    similarity_floor = 0.0
    similarity_ceiling = 0.42

    def __init__(self, variant: str = "fp32", *, threads: int = 1, batch: int = BATCH) -> None:
        self.variant = variant
        self.name = model_name(variant)
        self.threads = threads
        self.batch = batch
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime

            from memory.embeddings.minilm_cache import ensure_graph

            options = onnxruntime.SessionOptions()
            # Every graph rewrite (the int8 graph's quantize + MatMul fusion comes from it).
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = self.threads
            options.inter_op_num_threads = 1
            # No memory arena: it keeps a 32 x 256-token batch's activations for the life of
            # the process (+425 MB measured; +175 MB without it, at the same speed).
            options.enable_cpu_mem_arena = False
            # Idle threads sleep rather than spin: the cores are shared.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            self._tokenizer = load_tokenizer()
            self._session = onnxruntime.InferenceSession(
                str(ensure_graph(self.variant)),
                options,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=DISABLED_FUSIONS,
            )

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._session is None:
            self._load()
        assert self._session is not None and self._tokenizer is not None
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        encodings = [encoding.ids for encoding in self._tokenizer.encode_batch(texts)]
        for rows in length_sorted_batches([len(ids) for ids in encodings], self.batch):
            ids, mask = padded([encodings[i] for i in rows])
            out[rows] = self._session.run(
                ["embedding"], {"input_ids": ids, "attention_mask": mask}
            )[0]
        out[[i for i, text in enumerate(texts) if not text.strip()]] = 0.0  # no content
        if _TRIM is not None:
            _TRIM(0)
        return out
