"""The all-MiniLM-L6-v2 forward pass written as an ONNX graph from the named weights.

Built once from the tensors in model.safetensors with the `onnx` package's helper API, so
no model file is downloaded: embeddings (word + position + token type 0, LayerNorm), six
post-LayerNorm BERT layers (12-head self-attention, GELU), attention-masked mean
pooling and L2 normalisation -- sentence-transformers' pipeline for this model. The layers
use onnxruntime's fused CPU kernels where they are faster (com.microsoft `Attention` and
`FastGelu`; see `_layer`), so the graph is for onnxruntime, the runtime that loads it.

Inputs `input_ids` and `attention_mask` (int64, batch x tokens, both dimensions dynamic);
output `embedding` (float32, batch x 384, unit rows; a fully padded row is all zeros).
The same weights and the same `onnx` version give byte-identical files (initializers and
nodes are added in a fixed order; no timestamps), which the cache's hash relies on.
"""

from __future__ import annotations

import numpy as np

from memory.embeddings.minilm_files import DIM, EPS, HEADS, LAYERS

OPSET = 18  # LayerNormalization (17); reductions take their axes as an input (18)
GRAPH_VERSION = 3  # bump when the graph below changes (the cache key includes it)


class _Graph:
    """Accumulates nodes and initializers; names are made unique by a counter."""

    def __init__(self) -> None:
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, op_type: str, *inputs: str, **attributes) -> str:
        from onnx import helper

        self._count += 1
        output = f"{op_type.lower()}_{self._count}"
        self.nodes.append(
            helper.make_node(op_type, list(inputs), [output], name=output, **attributes)
        )
        return output


def _layer_norm(g: _Graph, x: str, w: dict[str, np.ndarray], prefix: str) -> str:
    scale = g.const(prefix + ".weight", w[prefix + ".weight"])
    bias = g.const(prefix + ".bias", w[prefix + ".bias"])
    return g.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=EPS)


def _layer(g: _Graph, x: str, mask: str, w: dict[str, np.ndarray], index: int) -> str:
    """One BERT layer: onnxruntime's fused Attention op (com.microsoft: packed Q/K/V
    projection, masked softmax), then each dense layer as MatMul + bias, the residual
    added and LayerNormalization; FastGelu (bias + tanh GELU) between the two feed-forward
    layers.

    Not SkipLayerNormalization, the runtime's fused residual + LayerNorm: in onnxruntime
    1.32 it took as long as all the feed-forward MatMuls of the int8 graph (37 ms of 127
    per 32 x 20-token batch, against 7 ms for Add + LayerNormalization), so the session
    also turns off the optimizer that would fuse it back (minilm_onnx.DISABLED_FUSIONS).
    FastGelu is the tanh GELU numpy's fallback computes (10% faster than the exact erf's
    BiasGelu in the int8 graph; cosine to it >= 0.9999)."""
    p = f"encoder.layer.{index}."
    s = p + "attention.self."
    qkv_weight = np.concatenate(
        [w[s + name + ".weight"].T for name in ("query", "key", "value")], axis=1
    )
    qkv_bias = np.concatenate([w[s + name + ".bias"] for name in ("query", "key", "value")])
    context = g.op(
        "Attention",
        x,
        g.const(s + "qkv.weight", qkv_weight),
        g.const(s + "qkv.bias", qkv_bias),
        mask,
        domain="com.microsoft",
        num_heads=HEADS,
    )

    def dense(v: str, name: str) -> str:
        return g.op("MatMul", v, g.const(name + ".weight", w[name + ".weight"].T))

    def add_norm(v: str, residual: str, name: str, norm: str) -> str:
        projected = g.op("Add", dense(v, name), g.const(name + ".bias", w[name + ".bias"]))
        return _layer_norm(g, g.op("Add", projected, residual), w, norm)

    x = add_norm(context, x, p + "attention.output.dense", p + "attention.output.LayerNorm")
    inner = p + "intermediate.dense"
    hidden = g.op(
        "FastGelu",
        dense(x, inner),
        g.const(inner + ".bias", w[inner + ".bias"]),
        domain="com.microsoft",
    )
    return add_norm(hidden, x, p + "output.dense", p + "output.LayerNorm")


def _embeddings(g: _Graph, w: dict[str, np.ndarray]) -> str:
    words = g.const("embeddings.word_embeddings.weight", w["embeddings.word_embeddings.weight"])
    # Token type is always 0: its row is folded into the position table once.
    positions = g.const(
        "embeddings.position_plus_token_type",
        w["embeddings.position_embeddings.weight"]
        + w["embeddings.token_type_embeddings.weight"][0][None, :],
    )
    # The first `tokens` rows of the position table (a 1-D Slice: the runtime rewrites a
    # Range + Gather into a Slice with scalar bounds that it then rejects).
    zero = g.const("slice_start", np.array([0], dtype=np.int64))
    length = g.op("Shape", "input_ids", start=1, end=2)
    used_positions = g.op("Slice", positions, zero, length, zero)
    x = g.op("Add", g.op("Gather", words, "input_ids"), used_positions)
    return _layer_norm(g, x, w, "embeddings.LayerNorm")


def _pooling_mask(g: _Graph) -> str:
    """The mask as float (batch, tokens, 1), to average over real tokens only."""
    mask = g.op("Cast", "attention_mask", to=1)  # float32
    last = g.const("last_axis", np.array([-1], dtype=np.int64))
    return g.op("Unsqueeze", mask, last)


def _pool_and_normalise(g: _Graph, x: str, mask: str) -> str:
    tokens = g.const("token_axis", np.array([1], dtype=np.int64))
    last = g.const("feature_axis", np.array([-1], dtype=np.int64))
    summed = g.op("ReduceSum", g.op("Mul", x, mask), tokens, keepdims=0)
    count = g.op("ReduceSum", mask, tokens, keepdims=0)
    floor = g.const("count_floor", np.array(1.0, dtype=np.float32))
    mean = g.op("Div", summed, g.op("Max", count, floor))
    norm = g.op("ReduceL2", mean, last, keepdims=1)
    tiny = g.const("norm_floor", np.array(1e-12, dtype=np.float32))
    return g.op("Div", mean, g.op("Max", norm, tiny))


def build_model(weights: dict[str, np.ndarray]):
    """The ONNX ModelProto of the forward pass (see the module docstring)."""
    from onnx import TensorProto, checker, helper

    g = _Graph()
    mask = _pooling_mask(g)
    x = _embeddings(g, weights)
    # Attention takes the 0/1 mask as int32 (padding gets -10000 before its softmax).
    raw_mask = g.op("Cast", "attention_mask", to=6)
    for index in range(LAYERS):
        x = _layer(g, x, raw_mask, weights, index)
    embedding = _pool_and_normalise(g, x, mask)
    g.nodes.append(helper.make_node("Identity", [embedding], ["embedding"], name="output"))
    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", DIM])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
        producer_name="lcm-server",
        producer_version=str(GRAPH_VERSION),
    )
    model.ir_version = 8  # what every onnxruntime since 1.14 reads
    checker.check_model(model)
    return model
