"""Evidence recall on public long-conversation benchmarks (`manage.py lcm_eval recall`).

Loads a dataset in the LoCoMo layout (REALTALK uses it) or the BEAM layout, ingests each
conversation through the service the messages API calls (`messages_append`: roles,
`created_at`, external ids), waits for its memory indexing, then asks every question
through the service behind `POST /api/v1/grep/` (`grep_for_user`, modes hybrid, semantic
and full_text) and scores the rows.

The metric (docs/memory.md, "Measuring recall"): the rows are read in rank order until a
budget of tokens is spent (500, 1,000, 2,000). A row costs its own tokens, at least
MIN_UNIT_TOKENS; a message's tokens count once (a second passage of a message already
paid for in full, or a unit over several messages already read, costs nothing more). A row that does not fit in what is left is skipped.
Recall of a question = the share of its evidence messages that the rows read cover;
averaged over the questions, by category. Beside every figure, computed in the same run on
the same stored messages: BM25 over single messages (`SingleMessageBM25`), read the same way.

Three pricings, side by side (issue 34; docs/benchmarks.md says which one each published
figure uses):
- **per row**: a row costs exactly what it returns: its `text` (the passage, memory.passages)
  when it has one, else its unit's tokens; a message row its message. Beside it, BM25 over
  the same units (`bm25_units`: the conversation's stored units, one document each, the best
  unit per message, each row priced as the passage the product would return for it).
- **per whole message** (`<system>:message`): every row costs its whole message the first
  time one of its rows is read (a reader who opens the message), so the systems compare with
  BM25 over single messages at its own price.
- **by rank**: the share of the evidence in the first 5, 10 and 20 rows, no token cost.

Nothing here is product code: the product's only part in it is the services it calls.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

BUDGETS = (500, 1000, 2000)
MIN_UNIT_TOKENS = 20
MODES = ("hybrid", "semantic", "full_text")
ROWS_ASKED = 100  # grep's limit per question: 2,000 tokens / 20 tokens a row at most
RANKS = (5, 10, 20)  # recall by rank: the first N rows, no token cost
BASELINE = "bm25_single_message"
UNIT_BASELINE = "bm25_units"
PER_MESSAGE = ":message"  # suffix of a system's whole-message pricing


# ---------------------------------------------------------------------------------------
# datasets


@dataclass
class EvalMessage:
    key: str  # the dataset's message id (external id suffix)
    role: str
    content: str
    created_at: dt.datetime


@dataclass
class EvalQuestion:
    text: str
    category: str
    evidence: list[str]  # message keys
    unresolved: int = 0  # evidence ids that name no message


@dataclass
class EvalConversation:
    name: str
    messages: list[EvalMessage]
    questions: list[EvalQuestion] = field(default_factory=list)


# LoCoMo's question categories by number (REALTALK uses 1-3 the same way).
LOCOMO_CATEGORIES = {
    "1": "1 multi-hop",
    "2": "2 temporal",
    "3": "3 open-domain",
    "4": "4 single-hop",
    "5": "5 adversarial",
}
_LOCOMO_DATE_FORMATS = ("%d.%m.%Y, %H:%M:%S", "%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y")


def _parse_date(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    for fmt in _LOCOMO_DATE_FORMATS:
        try:
            return dt.datetime.strptime(text.strip(), fmt).replace(tzinfo=dt.UTC)
        except ValueError:
            continue
    return None


def _evidence_ids(raw: Iterable[str]) -> list[str]:
    """D3:12 ids; `;`/`,`-separated lists and D12:3-D12:5 ranges expanded."""
    found: list[str] = []
    for item in raw:
        for piece in re.split(r"[;,]", str(item)):
            piece = piece.strip()
            span = re.fullmatch(r"D(\d+):(\d+)\s*-\s*(?:D\d+:)?(\d+)", piece)
            if span:
                session, first, last = (int(g) for g in span.groups())
                found.extend(f"D{session}:{n}" for n in range(first, last + 1))
            elif piece:
                found.append(piece)
    return list(dict.fromkeys(found))


def _locomo_category(value) -> str:
    return LOCOMO_CATEGORIES.get(str(value), str(value))


def load_locomo(path: Path) -> list[EvalConversation]:
    """One conversation per JSON file (REALTALK) or per item of a list (LoCoMo's file)."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    conversations = []
    for file in files:
        data = json.loads(file.read_text())
        samples = data if isinstance(data, list) else [data]
        for index, sample in enumerate(samples):
            body = sample.get("conversation", sample)
            names = sample.get("name") or {}
            first = names.get("speaker_1") or body.get("speaker_a")
            sessions = sorted(
                (int(m.group(1)), key) for key in body if (m := re.fullmatch(r"session_(\d+)", key))
            )
            messages: list[EvalMessage] = []
            last = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)
            for number, key in sessions:
                session_time = _parse_date(body.get(f"{key}_date_time"))
                for turn in body[key]:
                    text = (turn.get("clean_text") or turn.get("text") or "").strip()
                    if not text:
                        continue
                    speaker = turn.get("speaker") or ""
                    when = _parse_date(turn.get("date_time")) or session_time or last
                    when = max(when, last)  # keep time non-decreasing with seq
                    last = when
                    first = first or speaker
                    messages.append(
                        EvalMessage(
                            key=turn.get("dia_id") or f"D{number}:{len(messages) + 1}",
                            role="user" if speaker == first else "assistant",
                            content=f"{speaker}: {text}" if speaker else text,
                            created_at=when,
                        )
                    )
            known = {m.key for m in messages}
            questions = []
            for qa in sample.get("qa", []):
                ids = _evidence_ids(qa.get("evidence") or [])
                if not ids:
                    continue
                questions.append(
                    EvalQuestion(
                        text=qa["question"],
                        category=_locomo_category(qa.get("category", "")),
                        evidence=[i for i in ids if i in known],
                        unresolved=sum(1 for i in ids if i not in known),
                    )
                )
            name = file.stem if len(samples) == 1 else f"{file.stem}-{index}"
            conversations.append(EvalConversation(name, messages, questions))
    return conversations


_BEAM_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")


def _beam_time(anchor: str | None) -> dt.datetime | None:
    if not anchor:
        return None
    try:
        return dt.datetime.strptime(anchor.strip(), "%B-%d-%Y").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def _beam_ids(raw) -> list[int]:
    if isinstance(raw, dict):
        return [i for value in raw.values() for i in _beam_ids(value)]
    if isinstance(raw, list):
        return [i for value in raw for i in _beam_ids(value)]
    if isinstance(raw, int):
        return [raw]
    return []


def load_beam(path: Path) -> list[EvalConversation]:
    """`path` holds numbered folders with chat.json and probing_questions.json (or is one)."""
    folders = (
        [path]
        if (path / "chat.json").exists()
        else sorted(
            (p for p in path.iterdir() if (p / "chat.json").exists()),
            key=lambda p: int(p.name) if p.name.isdigit() else 0,
        )
    )
    conversations = []
    for folder in folders:
        batches = json.loads((folder / "chat.json").read_text())
        messages: list[EvalMessage] = []
        clock = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
        for batch in batches:
            anchor = _beam_time(batch.get("time_anchor"))
            if anchor and anchor > clock:
                clock = anchor
            for turn in batch.get("turns", []):
                for message in turn:
                    anchor = _beam_time(message.get("time_anchor"))
                    if anchor and anchor > clock:
                        clock = anchor
                    clock += dt.timedelta(minutes=1)
                    messages.append(
                        EvalMessage(
                            key=str(message["id"]),
                            role=message["role"],
                            content=_BEAM_MARKER.sub("", message["content"]).strip(),
                            created_at=clock,
                        )
                    )
        known = {m.key for m in messages}
        questions = []
        probing = folder / "probing_questions.json"
        if not probing.exists():
            probing = folder / "probing_questions" / "probing_questions.json"
        for category, items in json.loads(probing.read_text()).items():
            if category == "abstention":
                continue  # no evidence by design
            for item in items:
                ids = [str(i) for i in dict.fromkeys(_beam_ids(item.get("source_chat_ids")))]
                if not ids:
                    continue  # only conversation_references text: not scored
                questions.append(
                    EvalQuestion(
                        text=item["question"],
                        category=category,
                        evidence=[i for i in ids if i in known],
                        unresolved=sum(1 for i in ids if i not in known),
                    )
                )
        conversations.append(EvalConversation(f"beam-{folder.name}", messages, questions))
    return conversations


LOADERS = {"locomo": load_locomo, "beam": load_beam}


# ---------------------------------------------------------------------------------------
# the baseline: BM25 over single messages

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "him",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


def _terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class SingleMessageBM25:
    """Plain Okapi BM25 (k1 1.2, b 0.75) over one conversation's messages, one document a
    message: what a user could write in an afternoon."""

    def __init__(self, documents: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(_terms(d)) for d in documents]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg = (sum(self.lengths) / len(self.lengths)) if self.lengths else 1.0
        df: Counter = Counter()
        for counts in self.docs:
            df.update(counts.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def rank(self, query: str) -> list[int]:
        terms = set(_terms(query))
        scores = []
        for i, counts in enumerate(self.docs):
            s = 0.0
            for term in terms:
                tf = counts.get(term)
                if tf:
                    norm = self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
                    s += self.idf[term] * tf * (self.k1 + 1) / (tf + norm)
            if s > 0:
                scores.append((s, i))
        scores.sort(key=lambda pair: (-pair[0], pair[1]))
        return [i for _, i in scores]


class UnitBM25:
    """The same BM25 over one conversation's stored search units (one document a unit), the
    best unit per message, each row priced as the passage the product returns for a unit
    (memory.passages.passage_span over its message's units, LCM_SEARCH_PASSAGE_TOKENS):
    what the product's rows would be with its ranking swapped for plain BM25."""

    def __init__(self, conversation_id: int) -> None:
        from django.conf import settings
        from django.db.models import F

        from memory.models import Chunk
        from memory.passages import passage_span

        rows = list(
            Chunk.objects.filter(conversation_id=conversation_id, seq_end=F("seq_start"))
            .order_by("seq_start", "start_offset")
            .values_list("seq_start", "token_est", "rendered_text")
        )
        self.seqs = [seq for seq, _, _ in rows]
        by_message: dict[int, list[int]] = defaultdict(list)
        for at, seq in enumerate(self.seqs):
            by_message[seq].append(at)
        limit = settings.LCM_SEARCH_PASSAGE_TOKENS
        self.cost = [0] * len(rows)
        for positions in by_message.values():
            tokens = [rows[at][1] for at in positions]
            for i, at in enumerate(positions):
                first, last = passage_span(tokens, i, limit)
                self.cost[at] = sum(tokens[first : last + 1])
        self.bm25 = SingleMessageBM25([text for _, _, text in rows])

    def rank(self, query: str) -> list[Unit]:
        seen, units = set(), []
        for at in self.bm25.rank(query):
            if self.seqs[at] not in seen:
                seen.add(self.seqs[at])
                units.append(Unit((self.seqs[at],), self.cost[at]))
        return units


# ---------------------------------------------------------------------------------------
# scoring


@dataclass(frozen=True)
class Unit:
    seqs: tuple[int, ...]  # the messages a row covers
    tokens: int  # what reading it costs


def recall_at(units: list[Unit], evidence: set[int], budget: int, cap: dict[int, int]) -> float:
    """Share of `evidence` covered by the units read within `budget` (module doc).

    A unit costs its own tokens, at least MIN_UNIT_TOKENS, but never more than its
    messages have left to pay: a message's tokens count once, however many units hold it
    (a second passage of a message read in full, or a window over messages already read,
    costs nothing more). A unit over several messages holds them whole, so they are paid
    for once it is read; a passage pays towards its one message."""
    if not evidence:
        return 0.0
    paid: dict[int, float] = defaultdict(float)
    spent, covered = 0.0, set()
    for unit in units:
        left = [max(0.0, cap.get(seq, unit.tokens) - paid[seq]) for seq in unit.seqs]
        owed = sum(left)
        if not any(paid[seq] for seq in unit.seqs):
            owed = max(MIN_UNIT_TOKENS, owed)  # a first read costs at least the minimum
        cost = min(max(MIN_UNIT_TOKENS, unit.tokens), owed)
        if spent + cost > budget:
            continue
        spent += cost
        for seq in unit.seqs:
            paid[seq] = paid[seq] + cost if len(unit.seqs) == 1 else max(paid[seq], cap.get(seq, 0))
        covered.update(unit.seqs)
    return len(covered & evidence) / len(evidence)


def recall_by_rank(units: list[Unit], evidence: set[int], rows: int) -> float:
    """Share of `evidence` covered by the first `rows` rows, whatever they cost."""
    if not evidence:
        return 0.0
    covered = {seq for unit in units[:rows] for seq in unit.seqs}
    return len(covered & evidence) / len(evidence)


def as_messages(units: list[Unit], cap: dict[int, int]) -> list[Unit]:
    """The rows priced per whole message: each costs its messages' tokens (recall_at counts
    a message once, so a second row of a message read costs nothing)."""
    return [Unit(unit.seqs, sum(cap.get(seq, 0) for seq in unit.seqs)) for unit in units]


def score_rows(
    scores: Scores,
    system: str,
    category: str,
    units: list[Unit],
    evidence: set[int],
    cap: dict[int, int],
    share: float,
) -> None:
    """One question's rows under the three pricings (module doc)."""
    whole = as_messages(units, cap)
    for budget in BUDGETS:
        scores.add(system, category, budget, recall_at(units, evidence, budget, cap) * share)
        value = recall_at(whole, evidence, budget, cap) * share
        scores.add(system + PER_MESSAGE, category, budget, value)
    for rows in RANKS:
        value = recall_by_rank(units, evidence, rows) * share
        scores.add(system, category, f"r{rows}", value)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


@dataclass
class Scores:
    """recall[mode][category][budget] -> list of per-question recalls; latencies by mode."""

    recall: dict = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    )
    latency_ms: dict = field(default_factory=lambda: defaultdict(list))
    unresolved: int = 0
    evidence_total: int = 0
    questions: int = 0
    messages: int = 0
    index_seconds: float = 0.0
    units: int = 0

    def add(self, mode: str, category: str, budget: int, value: float) -> None:
        self.recall[mode][category][budget].append(value)
        self.recall[mode]["all"][budget].append(value)

    def mean(self, mode: str, category: str, budget: int) -> float | None:
        values = self.recall.get(mode, {}).get(category, {}).get(budget)
        return statistics.fmean(values) if values else None

    def as_dict(self) -> dict:
        modes = {}
        for mode, categories in self.recall.items():
            modes[mode] = {
                category: {str(b): round(statistics.fmean(v), 4) for b, v in budgets.items() if v}
                | {"n": len(next(iter(budgets.values()), []))}
                for category, budgets in categories.items()
            }
        return {
            "questions": self.questions,
            "messages": self.messages,
            "units": self.units,
            "evidence_ids": self.evidence_total,
            "evidence_unresolved": self.unresolved,
            "index_seconds": round(self.index_seconds, 1),
            "recall": modes,
            "latency_ms": {
                mode: {
                    "p50": round(percentile(v, 0.5), 2),
                    "p95": round(percentile(v, 0.95), 2),
                }
                for mode, v in self.latency_ms.items()
            },
        }


# ---------------------------------------------------------------------------------------
# the run


def ingest(conversation: EvalConversation, *, owner, tag: str) -> int:
    """The conversation through messages_append (as POST .../messages/ does), then its
    memory indexing run to the end (what the background job does)."""
    from conversations.inputs import MessageInput
    from conversations.services import conversation_create, messages_append

    created = conversation_create(owner=owner, session_id=f"eval-{tag}-{conversation.name}")
    record, new = created if isinstance(created, tuple) else (created, True)
    if not new and record.messages.exists():
        return record.pk  # ingested by an earlier run with the same --tag
    batch = 200
    for start in range(0, len(conversation.messages), batch):
        messages_append(
            conversation_id=record.pk,
            messages=[
                MessageInput(
                    role=m.role,
                    content=m.content,
                    external_id=f"{conversation.name}:{m.key}",
                    created_at=m.created_at,
                )
                for m in conversation.messages[start : start + batch]
            ],
        )
    return record.pk


def wait_for_indexing(conversation_id: int) -> None:
    from memory.indexing import index_conversation_messages

    index_conversation_messages(conversation_id=conversation_id)


@dataclass
class _Asked:
    """One ingested conversation, as the systems asking its questions need it."""

    owner: object  # the user the eval asks as
    conversation_id: int
    cap: dict[int, int]  # seq -> the message's tokens
    seq_by_pk: dict[int, int]


def _questions(conversations, *, scores: Scores, tag: str | None, limit_questions, progress):
    """Ingest and index each conversation (as the eval user, under `tag`, a new one by
    default), then for each question score the same-run BM25 baseline and yield (asked,
    question, evidence seqs, findable share) for the system under test; `progress` after
    each conversation."""
    from django.contrib.auth import get_user_model

    from conversations.models import Message
    from memory.models import Chunk

    owner, _ = get_user_model().objects.get_or_create(username="lcm-eval")
    tag = tag or dt.datetime.now(dt.UTC).strftime("%Y%m%d%H%M%S%f")
    for conversation in conversations:
        started = time.perf_counter()
        conversation_id = ingest(conversation, owner=owner, tag=tag)
        wait_for_indexing(conversation_id)
        scores.index_seconds += time.perf_counter() - started
        stored = list(
            Message.objects.filter(conversation_id=conversation_id)
            .order_by("seq")
            .values_list("seq", "external_id", "token_count", "content", "pk")
        )
        scores.messages += len(stored)
        scores.units += Chunk.objects.filter(conversation_id=conversation_id).count()
        seq_of = {ext.split(":", 1)[1]: seq for seq, ext, _, _, _ in stored}
        asked = _Asked(
            owner,
            conversation_id,
            cap={seq: tokens for seq, _, tokens, _, _ in stored},
            seq_by_pk={pk: seq for seq, _, _, _, pk in stored},
        )
        baseline = SingleMessageBM25([content for _, _, _, content, _ in stored])
        unit_baseline = UnitBM25(conversation_id)
        questions = conversation.questions
        if limit_questions:
            questions = questions[:limit_questions]
        for question in questions:
            evidence = {seq_of[k] for k in question.evidence}
            scores.questions += 1
            scores.unresolved += question.unresolved
            scores.evidence_total += len(question.evidence) + question.unresolved
            total = len(evidence) + question.unresolved
            share = len(evidence) / total if total else 0.0
            whole = [Unit((stored[i][0],), stored[i][2]) for i in baseline.rank(question.text)]
            score_rows(scores, BASELINE, question.category, whole, evidence, asked.cap, share)
            units = unit_baseline.rank(question.text)
            score_rows(scores, UNIT_BASELINE, question.category, units, evidence, asked.cap, share)
            yield asked, question, evidence, share
        if progress:
            progress(conversation.name, scores)


def run(
    conversations: list[EvalConversation],
    *,
    modes: tuple[str, ...] = MODES,
    limit_questions: int | None = None,
    tag: str | None = None,
    progress=None,
) -> Scores:
    from retrieval.grep import GrepRequest, grep_for_user

    scores = Scores()
    asking = _questions(
        conversations,
        scores=scores,
        tag=tag,
        limit_questions=limit_questions,
        progress=progress,
    )
    for asked, question, evidence, share in asking:
        for mode in modes:
            request = GrepRequest(
                query=question.text[:1000],
                mode=mode,
                scope="messages",
                conversation_id=asked.conversation_id,
                limit=ROWS_ASKED,
                sort="relevance",
            )
            began = time.perf_counter()
            rows = grep_for_user(user=asked.owner, request=request)
            scores.latency_ms[mode].append((time.perf_counter() - began) * 1000)
            units = _units(rows, asked.cap, asked.seq_by_pk)
            score_rows(scores, mode, question.category, units, evidence, asked.cap, share)
    return scores


def _units(rows: list[dict], cap: dict[int, int], seq_by_pk: dict[int, int]) -> list[Unit]:
    """grep rows as units, each priced at what it returns: a chunk row its `text` (the
    passage) when it carries one, else its unit's stored token estimate; a message row its
    message's tokens."""
    from core.token_estimate import estimate
    from memory.models import Chunk

    chunk_ids = [r["id"] for r in rows if r["type"] == "chunk" and "text" not in r]
    tokens = dict(Chunk.objects.filter(pk__in=chunk_ids).values_list("pk", "token_est"))
    units = []
    for row in rows:
        if row["type"] == "chunk":
            seqs = tuple(range(row["seq"], row["seq_end"] + 1))
            cost = estimate(row["text"]) if "text" in row else tokens.get(row["id"], 0)
            units.append(Unit(seqs, cost))
        elif row["type"] == "message":
            seq = row.get("seq", seq_by_pk.get(row["id"]))
            units.append(Unit((seq,), cap.get(seq, 0)))
    return units


def render(scores: Scores, modes: tuple[str, ...]) -> str:
    """The per-category table: each mode's recall at every budget beside a same-run BM25
    baseline priced alike: per row (what a row returns) beside BM25 over the same units
    (`bm25_units`, rows priced as the product's passages), and per whole message beside
    BM25 over single messages (rows priced as their message). A mode without a per-row
    figure for the baseline (the turn path) shows its figure beside BM25 over messages."""
    lines = [
        f"questions {scores.questions}, messages {scores.messages}, units {scores.units}, "
        f"evidence ids {scores.evidence_total} ({scores.unresolved} not findable), "
        f"ingest+index {scores.index_seconds:.1f} s",
        "",
        "| mode | category | n | "
        + " | ".join(f"row @{b} (BM25 units)" for b in BUDGETS)
        + " | "
        + " | ".join(f"message @{b} (BM25 messages)" for b in BUDGETS)
        + " | p50 ms | p95 ms |",
        "|---|---|---:|" + "---:|" * (2 * len(BUDGETS)) + "---:|---:|",
    ]
    base = scores.recall.get(BASELINE, {})
    categories = sorted(base, key=lambda c: (c == "all", c))
    for mode in modes:
        latency = scores.latency_ms.get(mode, [])
        for category in categories:
            n = len(base[category][BUDGETS[0]])
            per_row = UNIT_BASELINE if mode + PER_MESSAGE in scores.recall else BASELINE
            cells = [_beside(scores, mode, per_row, category, b) for b in BUDGETS]
            cells += [_beside(scores, mode + PER_MESSAGE, BASELINE, category, b) for b in BUDGETS]
            tail = (
                f"{percentile(latency, 0.5):.1f} | {percentile(latency, 0.95):.1f}"
                if category == "all"
                else " | "
            )
            lines.append(f"| {mode} | {category} | {n} | " + " | ".join(cells) + f" | {tail} |")
    return "\n".join(lines)


def _beside(scores: Scores, system: str, baseline: str, category: str, budget: int) -> str:
    value = scores.mean(system, category, budget)
    if value is None:
        return "-"
    return f"{value:.3f} ({scores.mean(baseline, category, budget):.3f})"


def render_pricings(scores: Scores, modes: tuple[str, ...]) -> str:
    """The three pricings side by side (module doc), per category: each system's recall
    priced per row (what it returns), per whole message, and by rank (first 5/10/20 rows)."""
    head = (
        "| category | system | "
        + " | ".join(f"row @{b}" for b in BUDGETS)
        + " | "
        + " | ".join(f"message @{b}" for b in BUDGETS)
        + " | "
        + " | ".join(f"rows {r}" for r in RANKS)
        + " |"
    )
    lines = [
        "Same price: per row = what a row returns (its passage), per message = the whole "
        "message of each row read, rows N = the first N rows (no token cost).",
        "",
        head,
        "|---|---|" + "---:|" * (2 * len(BUDGETS) + len(RANKS)),
    ]
    base = scores.recall.get(BASELINE, {})
    systems = (*modes, UNIT_BASELINE, BASELINE)
    for category in sorted(base, key=lambda c: (c != "all", c)):
        for system in systems:
            priced = system if system == BASELINE else system + PER_MESSAGE
            cells = [scores.mean(system, category, b) for b in BUDGETS]
            cells += [scores.mean(priced, category, b) for b in BUDGETS]
            cells += [scores.mean(system, category, f"r{r}") for r in RANKS]
            text = " | ".join("-" if v is None else f"{v:.3f}" for v in cells)
            lines.append(f"| {category} | {system} | {text} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# the same questions through a turn's retrieval (`lcm_eval recall --via turn`)

TURN_MODE = "turn"


@dataclass
class TurnScores(Scores):
    """Scores, plus the tokens a turn injected (items and wrappers) per budget."""

    injected: dict = field(default_factory=lambda: defaultdict(list))

    def as_dict(self) -> dict:
        return {
            **super().as_dict(),
            "injected_tokens_mean": {
                str(b): round(statistics.fmean(v), 1) for b, v in self.injected.items() if v
            },
        }


def render_turn(scores: TurnScores) -> str:
    """`render`'s table for the turn path, and what the turn injected per budget."""
    used = ", ".join(
        f"@{b} {statistics.fmean(scores.injected[b]):.0f}" for b in BUDGETS if scores.injected[b]
    )
    return render(scores, (TURN_MODE,)) + f"\n\nmean tokens injected per turn: {used}"


def packed_units(items) -> list[Unit]:
    """A turn's packed items as units: each covers its chunk's messages and costs what the
    turn paid for it (its tokens plus the untrusted wrapper's)."""
    from memory.turn_retrieval import WRAPPER_TOKENS

    return [
        Unit(
            tuple(range(item.provenance["seq_start"], item.provenance["seq_end"] + 1)),
            item.tokens + WRAPPER_TOKENS,
        )
        for item in items
    ]


def run_via_turn(
    conversations: list[EvalConversation],
    *,
    limit_questions: int | None = None,
    tag: str | None = None,
    progress=None,
) -> TurnScores:
    """Every question through `memory.turn_retrieval.turn_retrieve` (what `retrieve_for_turn`
    runs for a turn, over the conversation instead of a branch's ancestry), once per
    budget, with the budget as the turn's retrieval budget. Recall at a budget is the
    share of the evidence the packed items cover: the turn's packing already kept them
    within it (wrapper tokens included), so they are not read again by `recall_at`.
    Recorded under the mode "turn", beside the same BM25 baseline as `run`."""
    from memory.turn_retrieval import turn_retrieve
    from memory.vectors import ScopeFilter

    scores = TurnScores()
    asking = _questions(
        conversations,
        scores=scores,
        tag=tag,
        limit_questions=limit_questions,
        progress=progress,
    )
    for asked, question, evidence, share in asking:
        scope = ScopeFilter(conversations=((asked.conversation_id, None),))
        for budget in BUDGETS:
            began = time.perf_counter()
            _, packed, stats = turn_retrieve(
                scope=scope, query=question.text[:1000], budget_tokens=budget
            )
            scores.latency_ms[TURN_MODE].append((time.perf_counter() - began) * 1000)
            scores.injected[budget].append(stats["packed_tokens"])
            covered = {seq for unit in packed_units(packed) for seq in unit.seqs}
            value = (len(covered & evidence) / len(evidence) if evidence else 0.0) * share
            scores.add(TURN_MODE, question.category, budget, value)
    return scores
