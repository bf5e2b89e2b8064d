"""Embedding throughput of all-MiniLM-L6-v2, numpy against ONNX Runtime, side by side in
one run (`lcm_bench --only embeddings`).

Three corpora: short chat messages, BEAM-100K's long messages and a coding agent's tool
outputs -- read from the public datasets in ../shared (REALTALK, BEAM-100K, the Claude Code
sessions of fixtures/agent-sessions; EMBEDDINGS_BENCH_SHARED names another folder), or,
where they are missing, generated here in the same shapes (the notes say which). Each
message is embedded as indexing embeds it: cut into search units
(LCM_MEMORY_UNIT_TOKENS, memory/chunker.py), every unit embedded. Every variant embeds
every corpus in each round, the rounds interleaved, and the table gives each variant's
median beside the numpy baseline of the same run: the machine is shared, so only ratios
measured together mean much (the load average before and after is in the notes). Tokens
are the model's word pieces of the units. Variants: numpy (today's), the runtime's fp32
and int8 graphs with one thread, int8 with two intra-op threads, and int8 in two
processes of one thread each (each embedding half). Then: recall@6 of the vectors alone
on the recall fixture, int8 against fp32, and the resident memory of a fresh Django
process before and after it loads each model.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from django.conf import settings

from benchmarks import recall_fixture
from benchmarks.harness import BenchContext, BenchRow, benchmark
from benchmarks.recall_eval import load_beam, load_locomo
from memory.chunker import Segment, unit_segments
from memory.embeddings.minilm_files import load_tokenizer
from memory.embeddings.minilm_numpy import MiniLMNumpy
from memory.embeddings.minilm_onnx import MiniLMOnnx

ROUNDS = int(os.environ.get("EMBEDDINGS_BENCH_ROUNDS", "3"))
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


def shared_dir() -> Path | None:
    """The public datasets and fixtures (../shared from the project root, or from the
    worktree's parent), or EMBEDDINGS_BENCH_SHARED; None when there are none."""
    named = os.environ.get("EMBEDDINGS_BENCH_SHARED")
    root = Path(settings.BASE_DIR)
    for candidate in (
        [Path(named)] if named else [root.parent / "shared", root.parents[1] / "shared"]
    ):
        if (candidate / "datasets").is_dir():
            return candidate
    return None


def agent_tool_outputs(folder: Path) -> list[str]:
    """The text of every tool result in the Claude Code sessions under `folder`."""
    outputs = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                content = (json.loads(line).get("message") or {}).get("content")
            except (json.JSONDecodeError, AttributeError):
                continue
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                text = block.get("content")
                if isinstance(text, list):
                    text = "\n".join(b.get("text", "") for b in text if isinstance(b, dict))
                if isinstance(text, str) and text.strip():
                    outputs.append(text)
    return outputs


def chat_messages(ctx: BenchContext) -> list[str]:
    """Short chat messages: REALTALK's (all ten chats) or the recall fixture's."""
    shared = shared_dir()
    if shared is None:
        chat, _ = recall_fixture.messages(total=ctx.n(2000), facts=max(1, ctx.n(100)))
        return [text for _, text in chat]
    return [m.content for c in load_locomo(shared / "datasets" / "realtalk") for m in c.messages]


def _corpora(ctx: BenchContext) -> tuple[dict[str, list[str]], str]:
    """Messages per corpus (chat, beam, tool) and where they came from."""
    rng = random.Random(33)
    shared = shared_dir()
    if shared is None:
        chat, _ = recall_fixture.messages(total=ctx.n(600), facts=max(1, ctx.n(60)))
        generated = {
            "chat": [text for _, text in chat],
            "beam": _beam_messages(ctx.n(40), rng),
            "tool": _tool_outputs(ctx.n(40), rng),
        }
        return generated, "generated (no ../shared datasets)"
    realtalk = load_locomo(shared / "datasets" / "realtalk")[0].messages
    beam = load_beam(shared / "datasets" / "beam-100k" / "1")[0].messages
    tools = agent_tool_outputs(shared / "fixtures" / "agent-sessions" / "claude-code")
    rng.shuffle(tools)
    real = {
        "chat": [m.content for m in realtalk[: ctx.n(600)]],
        "beam": [m.content for m in beam[: ctx.n(40)]],
        "tool": tools[: ctx.n(40)],
    }
    return real, f"REALTALK chat 1, BEAM-100K conversation 1, Claude Code tool results ({shared})"


def as_units(corpus: str, texts: list[str]) -> list[str]:
    """The search units indexing embeds for these messages."""
    tool = corpus == "tool"
    segments = [
        Segment(text=text, role="tool" if tool else "user", seq=i + 1, is_tool_result=tool)
        for i, text in enumerate(texts)
    ]
    units = unit_segments(segments, unit_tokens=settings.LCM_MEMORY_UNIT_TOKENS)
    return [unit.rendered_text for unit in units]


def _variants() -> dict[str, object]:
    return {
        "numpy": MiniLMNumpy(),
        "onnx fp32, 1 thread": MiniLMOnnx("fp32", threads=1),
        "onnx int8, 1 thread": MiniLMOnnx("int8", threads=1),
        "onnx int8, 2 threads": MiniLMOnnx("int8", threads=2),
        "onnx int8, 2 processes": _TwoProcesses("int8"),
    }


_worker_backend = None


def _worker_start(variant: str) -> None:
    global _worker_backend
    _worker_backend = MiniLMOnnx(variant, threads=1)
    _worker_backend.embed(["warm up"])


def _worker_embed(texts: list[str]) -> np.ndarray:
    assert _worker_backend is not None
    return _worker_backend.embed(texts)


class _TwoProcesses:
    """Two worker processes of one thread each, each embedding half of the texts."""

    def __init__(self, variant: str) -> None:
        self._pool = ProcessPoolExecutor(2, initializer=_worker_start, initargs=(variant,))

    def embed(self, texts: list[str]) -> np.ndarray:
        half = len(texts) // 2
        parts = list(self._pool.map(_worker_embed, [texts[:half], texts[half:]]))
        return np.concatenate(parts) if texts else np.zeros((0, 384), dtype=np.float32)

    def close(self) -> None:
        self._pool.shutdown()


def _seconds(backend, texts: list[str]) -> float:
    start = time.perf_counter()
    backend.embed(texts)
    return time.perf_counter() - start


def _throughput_rows(variants, corpora, units, tokens) -> list[BenchRow]:
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(ROUNDS):  # interleaved: every variant sees the same load, round by round
        for corpus in corpora:
            for name, backend in variants.items():
                times.setdefault((corpus, name), []).append(_seconds(backend, units[corpus]))
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
                    f"{len(texts)} messages, {len(units[corpus])} units, "
                    f"{tokens[corpus] / len(units[corpus]):.0f} tokens per unit",
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
import memory.indexing  # what a worker has imported before its first embedding
def rss():
    return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
from memory.embeddings import backend_for
before = rss()
variant = os.environ['BENCH_VARIANT']
if variant == 'numpy':
    from memory.embeddings.minilm_numpy import MiniLMNumpy
    backend = MiniLMNumpy()
else:
    backend = backend_for('minilm', variant)
backend.embed(['word ' * 300] * 32)  # a full batch at the 256-token cut: peak activations
backend.embed(['a short message about the plan'] * 200)
print(json.dumps({'before': before, 'rss': rss()}))
"""


def _rss_rows() -> list[BenchRow]:
    rows, numpy_rss = [], 0
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
        numpy_rss = numpy_rss or figures["rss"]
        rows.append(
            BenchRow(
                f"worker resident memory, model loaded: {variant}",
                figures["rss"] / 1e6,
                "MB",
                "<= numpy + 100 MB" if variant != "numpy" else "",
                f"{figures['before'] / 1e6:.0f} MB before loading, +{(figures['rss'] - figures['before']) / 1e6:.0f} MB "
                f"after a batch of 32 x 256 tokens and 200 short texts; "
                f"{(figures['rss'] - numpy_rss) / 1e6:+.0f} MB against numpy",
            )
        )
    return rows


@benchmark("embeddings")
def embeddings(ctx: BenchContext) -> list[BenchRow]:
    ctx.notes.append(f"embeddings: load average before {os.getloadavg()} (2 cores)")
    corpora, source = _corpora(ctx)
    units = {name: as_units(name, texts) for name, texts in corpora.items()}
    tokenizer = load_tokenizer()
    tokens = {
        name: sum(len(e.ids) for e in tokenizer.encode_batch(texts))
        for name, texts in units.items()
    }
    variants = _variants()
    for backend in variants.values():
        backend.embed(["warm up: load the weights, build or verify the graph"])
    try:
        rows = _throughput_rows(variants, corpora, units, tokens)
    finally:
        variants["onnx int8, 2 processes"].close()
    rows += _recall_rows(variants, ctx)
    rows += _rss_rows()
    ctx.notes.append(
        f"embeddings: load average after {os.getloadavg()}; {ROUNDS} rounds, medians; "
        f"corpora: {source}; units of {settings.LCM_MEMORY_UNIT_TOKENS} tokens"
    )
    return rows
