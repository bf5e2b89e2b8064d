"""Embedding throughput of all-MiniLM-L6-v2, numpy against ONNX Runtime, side by side in
one run (`lcm_bench --only embeddings`).

Three corpora, generated here (deterministic): short chat messages (the recall fixture's
conversation), BEAM-like messages of ~440 tokens, and agent-style tool outputs (listings,
tracebacks, code, JSON; most past the 256-token cut). Every variant embeds every corpus in
each round, the rounds interleaved, and the table gives each variant's median beside the
numpy baseline of the same run: the machine is shared, so only ratios measured together
mean much (the load average before and after is in the notes). Tokens are the model's
word pieces after the cut (what it computes on). Then: batch sizes, recall@6 of the
vectors alone on the recall fixture, int8 against fp32, and the resident memory the model
adds to a fresh process (numpy, fp32, int8).
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import time

import numpy as np

from benchmarks import recall_fixture
from benchmarks.harness import BenchContext, BenchRow, benchmark
from memory.embeddings.minilm_files import load_tokenizer
from memory.embeddings.minilm_numpy import MiniLMNumpy
from memory.embeddings.minilm_onnx import MiniLMOnnx

ROUNDS = int(os.environ.get("EMBEDDINGS_BENCH_ROUNDS", "2"))
TOP_K = 6
_PROSE_TEXT = (
    "we talked about the release plan and the budget for next quarter then moved on to "
    "the migration of the billing service which still fails on large invoices because the "
    "retry loop gives up too early so the team agreed to raise the timeout and add a test "
    "for the edge case where a customer has more than one open account in two regions"
)
_PROSE = _PROSE_TEXT.split()


def _beam_messages(count: int, rng: random.Random) -> list[str]:
    """~440-token messages (about 330 words of prose, BEAM's long turns)."""
    return [
        " ".join(rng.choice(_PROSE) for _ in range(rng.randint(300, 360))) for _ in range(count)
    ]


def _tool_outputs(count: int, rng: random.Random) -> list[str]:
    """What a coding agent's tools print: listings, tracebacks, code, JSON, test logs."""
    makers = [
        lambda i: "\n".join(
            f"-rw-r--r-- 1 dev dev {rng.randint(100, 99999):>6} Nov 27 12:{i % 60:02d} "
            f"src/module_{j}/file_{rng.randint(1, 400)}.py"
            for j in range(rng.randint(20, 80))
        ),
        lambda i: (
            "Traceback (most recent call last):\n"
            + "\n".join(
                f'  File "/app/services/handler_{j}.py", line {rng.randint(1, 900)}, in run_{j}\n'
                f"    result = client.request(payload, timeout={rng.randint(1, 30)})"
                for j in range(rng.randint(5, 25))
            )
            + f"\nTimeoutError: request {i} timed out"
        ),
        lambda i: "\n".join(
            f"def handle_{j}(request, retries={rng.randint(1, 5)}):\n"
            f"    value = request.get('field_{j}')\n    if value is None:\n"
            f"        raise ValueError('missing field_{j}')\n    return value * {j}\n"
            for j in range(rng.randint(5, 30))
        ),
        lambda i: (
            "{"
            + ", ".join(
                f'"key_{j}": {{"id": {rng.randint(1, 10**6)}, "ok": {str(j % 2 == 0).lower()}}}'
                for j in range(rng.randint(10, 60))
            )
            + "}"
        ),
        lambda i: "\n".join(
            f"tests/test_{j}.py::test_case_{rng.randint(1, 99)} "
            + rng.choice(["PASSED", "PASSED", "FAILED", "SKIPPED"])
            for j in range(rng.randint(20, 90))
        ),
    ]
    return [makers[i % len(makers)](i) for i in range(count)]


def _corpora(ctx: BenchContext) -> dict[str, list[str]]:
    rng = random.Random(33)
    chat, _ = recall_fixture.messages(total=ctx.n(1000), facts=max(1, ctx.n(100)))
    return {
        "chat": [text for _, text in chat],
        "beam": _beam_messages(ctx.n(24), rng),
        "tool": _tool_outputs(ctx.n(24), rng),
    }


def _variants() -> dict[str, object]:
    return {
        "numpy": MiniLMNumpy(),
        "onnx fp32, 1 thread": MiniLMOnnx("fp32", threads=1),
        "onnx fp32, 2 threads": MiniLMOnnx("fp32", threads=2),
        "onnx int8, 1 thread": MiniLMOnnx("int8", threads=1),
        "onnx int8, 2 threads": MiniLMOnnx("int8", threads=2),
    }


def _seconds(backend, texts: list[str]) -> float:
    start = time.perf_counter()
    backend.embed(texts)
    return time.perf_counter() - start


def _throughput_rows(variants, corpora, tokens) -> list[BenchRow]:
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(ROUNDS):  # interleaved: every variant sees the same load, round by round
        for corpus, texts in corpora.items():
            for name, backend in variants.items():
                times.setdefault((corpus, name), []).append(_seconds(backend, texts))
    rows = []
    for corpus, texts in corpora.items():
        base = statistics.median(times[(corpus, "numpy")])
        for name in variants:
            seconds = statistics.median(times[(corpus, name)])
            rows.append(
                BenchRow(
                    f"embed {corpus}: {name}",
                    len(texts) / seconds,
                    "messages/s",
                    ">= 3x numpy" if name != "numpy" else "",
                    f"{tokens[corpus] / seconds:,.0f} tokens/s; x{base / seconds:.2f} numpy; "
                    f"{len(texts)} texts, {tokens[corpus] / len(texts):.0f} tokens each",
                )
            )
    return rows


def _batch_rows(corpora, tokens, variant: str) -> list[BenchRow]:
    rows = []
    for corpus in ("chat", "beam"):
        for size in (8, 16, 32, 64):
            backend = MiniLMOnnx(variant, threads=1, batch=size)
            backend.embed(["warm up"])
            seconds = min(_seconds(backend, corpora[corpus]) for _ in range(ROUNDS))
            rows.append(
                BenchRow(
                    f"batch {size}, {corpus}: onnx {variant}",
                    len(corpora[corpus]) / seconds,
                    "messages/s",
                    detail=f"{tokens[corpus] / seconds:,.0f} tokens/s (texts sorted by length)",
                )
            )
    return rows


def _recall_rows(variants, ctx: BenchContext) -> list[BenchRow]:
    """recall@6 of the vectors alone: each planted fact's question, ranked against every
    message of the fixture by cosine (no database, no lexical leg)."""
    messages, planted = recall_fixture.messages(total=ctx.n(2000), facts=max(1, ctx.n(200)))
    texts = [text for _, text in messages]
    rows, vectors = [], {}
    for name in ("numpy", "onnx fp32, 1 thread", "onnx int8, 1 thread"):
        backend = variants[name]
        matrix = backend.embed(texts)
        questions = backend.embed([fact.question for fact in planted])
        top = np.argsort(-(questions @ matrix.T), axis=1)[:, :TOP_K]
        hits = sum(fact.seq - 1 in row for fact, row in zip(planted, top, strict=True))
        vectors[name] = matrix
        rows.append(
            BenchRow(
                f"recall@{TOP_K} (vectors only): {name.split(',')[0]}",
                100 * hits / len(planted),
                "%",
                detail=f"{hits} of {len(planted)} facts in {len(texts)} messages",
            )
        )
    fp32 = vectors["onnx fp32, 1 thread"]
    for name in ("numpy", "onnx int8, 1 thread"):
        cosines = (vectors[name] * fp32).sum(axis=1)
        rows.append(
            BenchRow(
                f"cosine to onnx fp32: {name.split(',')[0]}",
                1000 * (1 - float(cosines.min())),
                "1e-3 (1 - min cosine)",
                detail=f"min {cosines.min():.5f}, mean {cosines.mean():.5f} over {len(texts)} messages",
            )
        )
    return rows


_RSS_CODE = """
import os, django, json
os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'lcmsite.settings')
django.setup()
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
from memory.embeddings.minilm_numpy import MiniLMNumpy
from memory.embeddings.minilm_onnx import MiniLMOnnx
variant = os.environ['BENCH_VARIANT']
backend = MiniLMNumpy() if variant == 'numpy' else MiniLMOnnx(variant)
before = rss()
backend.embed(['word ' * 300] * 32)  # a full batch at the 256-token cut: peak activations
print(json.dumps({'growth': rss() - before, 'rss': rss()}))
"""


def _rss_rows() -> list[BenchRow]:
    import json

    rows = []
    for variant in ("numpy", "fp32", "int8"):
        out = subprocess.run(
            [sys.executable, "-c", _RSS_CODE],
            env={**os.environ, "BENCH_VARIANT": variant},
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        figures = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(
            BenchRow(
                f"resident memory the model adds: {variant}",
                figures["growth"] / 1e6,
                "MB",
                "<= numpy + 100 MB" if variant != "numpy" else "",
                f"process RSS {figures['rss'] / 1e6:.0f} MB after a batch of 32 x 256 tokens",
            )
        )
    return rows


@benchmark("embeddings")
def embeddings(ctx: BenchContext) -> list[BenchRow]:
    ctx.notes.append(f"embeddings: load average before {os.getloadavg()} (2 cores)")
    corpora = _corpora(ctx)
    tokenizer = load_tokenizer()
    tokens = {
        name: sum(len(e.ids) for e in tokenizer.encode_batch(texts))
        for name, texts in corpora.items()
    }
    variants = _variants()
    for backend in variants.values():
        backend.embed(["warm up: load the weights, build or verify the graph"])
    rows = _throughput_rows(variants, corpora, tokens)
    rows += _batch_rows(corpora, tokens, "fp32")
    rows += _recall_rows(variants, ctx)
    rows += _rss_rows()
    ctx.notes.append(
        f"embeddings: load average after {os.getloadavg()}; {ROUNDS} rounds, medians; "
        "corpora generated in benchmarks/embeddings.py"
    )
    return rows
