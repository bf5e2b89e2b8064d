"""What to embed of long tool outputs (`lcm_bench --only embeddings_tool_recall`, issue 33):
indexing time and evidence recall of the real Claude Code sessions in
../shared/fixtures/agent-sessions/claude-code under each LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS
policy, every policy on the same messages and questions, in one run.

Messages: each session file's user and assistant text blocks and tool results, in file
order (a tool result is a `tool` message, keyed by its record's uuid and block index).
Questions are generated, not copied into the repository: with a fixed seed, 40 tool
results over 1,000 tokens and 20 shorter ones (over 50 tokens) are drawn across the
sessions; from each, one line of at least seven words that no other tool result holds at a random position (for a long
result: from its middle, beyond its first and last quarter, the part a head-and-tail
policy leaves unembedded); its first 16 words are the question and that tool result is the
evidence. It is the question an agent asks when it recalls a fragment of an earlier
output (an error, a path, a value) and needs the output back. EMBEDDINGS_TOOL_LIMITS sets
the policies (default "0,2000,1000,500,1": every unit, head+tail of 2,000 / 1,000 / 500
tokens, nothing of any tool result).

Scored as `lcm_eval recall` scores (benchmarks/recall_eval.py: evidence recall at 500 /
1,000 / 2,000 tokens read, BM25 over single messages beside it).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import re
from pathlib import Path

from django.test.utils import override_settings

from benchmarks import recall_eval
from benchmarks.embeddings import shared_dir
from benchmarks.harness import BenchContext, BenchRow, benchmark
from core.token_estimate import estimate

SEED = 33
LONG, SHORT = 40, 20  # questions on tool results over 1,000 tokens, and on shorter ones
_WORDS = re.compile(r"[A-Za-z0-9_./:-]+")


def _tool_text(block: dict) -> str:
    text = block.get("content")
    if isinstance(text, list):
        text = "\n".join(b.get("text", "") for b in text if isinstance(b, dict))
    return text if isinstance(text, str) else ""


def _messages(record: dict) -> list[tuple[str, str, str]]:
    """(key suffix, role, text) of one session record's text blocks and tool results."""
    message = record.get("message") or {}
    content, role = message.get("content"), message.get("role")
    if role not in ("user", "assistant"):
        return []
    if isinstance(content, str):
        return [("0", role, content)] if content.strip() else []
    out = []
    for i, block in enumerate(content if isinstance(content, list) else []):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and block.get("text", "").strip():
            out.append((str(i), role, block["text"]))
        elif block.get("type") == "tool_result" and _tool_text(block).strip():
            out.append((str(i), "tool", _tool_text(block)))
    return out


def load_session(path: Path) -> recall_eval.EvalConversation:
    messages = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not record.get("uuid"):
            continue
        when = recall_eval._parse_date(record.get("timestamp")) or dt.datetime.now(dt.UTC)
        for suffix, role, text in _messages(record):
            key = f"{record['uuid']}:{suffix}"
            messages.append(recall_eval.EvalMessage(key, role, text, when))
    return recall_eval.EvalConversation(path.stem, messages)


def _question_line(text: str, rng: random.Random, long: bool, tools: list[str]) -> str | None:
    """A line's first 16 words (a file viewer's leading line number dropped), from a line
    that no other tool result holds."""
    lines = [ln for ln in text.splitlines() if len(_WORDS.findall(ln)) >= 7]
    if long:
        lines = lines[len(lines) // 4 : len(lines) - len(lines) // 4]
    rng.shuffle(lines)
    for line in lines:
        if sum(line.strip() in other for other in tools) == 1:
            words = _WORDS.findall(line)
            return " ".join(words[1:17] if words[0].isdigit() else words[:16])
    return None


def add_questions(conversations: list[recall_eval.EvalConversation]) -> None:
    """The generated questions (module docstring), set on their conversations."""
    rng = random.Random(SEED)
    tools = [(c, m) for c in conversations for m in c.messages if m.role == "tool"]
    texts = [m.content for _, m in tools]
    long = [t for t in tools if estimate(t[1].content) > 1000]
    short = [t for t in tools if 50 < estimate(t[1].content) <= 1000]
    for pool, count, is_long in ((long, LONG, True), (short, SHORT, False)):
        rng.shuffle(pool)
        asked = 0
        for conversation, message in pool:
            line = _question_line(message.content, rng, is_long, texts)
            if line is None or asked == count:
                continue
            category = "long" if is_long else "short"
            conversation.questions.append(recall_eval.EvalQuestion(line, category, [message.key]))
            asked += 1


def sessions(folder: Path) -> list[recall_eval.EvalConversation]:
    conversations = [load_session(p) for p in sorted(folder.glob("*.jsonl"))]
    add_questions(conversations)
    return [c for c in conversations if c.messages]


def _rows(limit: int, scores: recall_eval.Scores) -> list[BenchRow]:
    name = "every unit" if limit == 0 else f"head+tail {limit}"
    rows = [
        BenchRow(
            f"tool outputs, {name}: ingest + index",
            scores.index_seconds,
            "s",
            "",
            f"{scores.messages} messages, {scores.units} units, {scores.questions} questions",
        )
    ]
    for mode in ("hybrid", "semantic", recall_eval.BASELINE):
        for category in ("all", "long", "short"):
            cells = [scores.mean(mode, category, b) for b in recall_eval.BUDGETS]
            rows.append(
                BenchRow(
                    f"tool outputs, {name}: {mode} recall, {category} @1000",
                    cells[1] or 0.0,
                    "",
                    "",
                    "@500/@1000/@2000 " + " / ".join(f"{c or 0:.3f}" for c in cells),
                )
            )
    return rows


@benchmark("embeddings_tool_recall")
def embeddings_tool_recall(ctx: BenchContext) -> list[BenchRow]:
    shared = shared_dir()
    if shared is None:
        ctx.notes.append("embeddings_tool_recall: skipped (no ../shared agent sessions)")
        return []
    folder = shared / "fixtures" / "agent-sessions" / "claude-code"
    limits = [
        int(x) for x in os.environ.get("EMBEDDINGS_TOOL_LIMITS", "0,2000,1000,500,1").split(",")
    ]
    tag = dt.datetime.now(dt.UTC).strftime("%H%M%S")
    rows = []
    for limit in limits:
        load = os.getloadavg()[0]
        with override_settings(LCM_MEMORY_EMBED_TOOL_RESULT_TOKENS=limit):
            scores = recall_eval.run(
                sessions(folder), modes=("hybrid", "semantic"), tag=f"tools{limit}-{tag}"
            )
        rows += _rows(limit, scores)
        ctx.notes.append(
            f"embeddings_tool_recall: limit {limit}, load {load:.1f} -> {os.getloadavg()[0]:.1f}"
        )
    return rows
