"""`lcm_eval fidelity PATH...`: how many of a session's handles survive compaction at a
given size, beside two baselines computed in the same run (docs/benchmarks.md, "Fidelity").

A session file is imported (the capture importers; a conversation id is read as it is) and
cut into spans: the messages each agent compaction replaced, where the file holds one, else
the whole main conversation. For each span and size S (default: the agent's own summary's
size, else 2,700 tokens; and twice that), the span's handles (compaction/summarizers/handles.py)
are counted in:

* `lcm summary`: one deterministic summary of the span at S tokens;
* `lcm compacted`: the context after `until_under` S on a scratch copy of the span (fresh
  tail 0, the configured leaf and condensed targets: the product's summary DAG);
* `newest records`: the newest messages of the span that fit in S tokens;
* `agent summary`: the agent's own compaction summary over the span (its own size);
* `names list`: every handle that is a name (files, commands, errors, identifiers, URLs,
  numbers), a line per kind: what a summary that only names things keeps;
* `uncompacted span`: the span's messages as the summarizer reads them (the ceiling);
* `model summary` (with `--model`): one model summary of the span at S through the
  engine's escalation and fidelity gate, the model served by a local recording upstream
  (benchmarks/recording_upstream.py); its row says what the gate did.

Each text is measured twice: the handles it names, and the relation probes it holds
(compaction/summarizers/relations.py, whose rules `RULES` prints): which file changed how,
which error was fixed by what or is still open, what the user asked, what was chosen and
why, what is still open.

Writes under the user `lcm-eval-fidelity`: use a scratch database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.test import override_settings

from benchmarks.capture import detect_format, session_files
from compaction import escalation
from compaction.engine import compact_conversation
from compaction.summarizers import (
    DeterministicSummarizer,
    SourceItem,
    Summarizer,
    SummaryRequest,
    render_sources,
)
from compaction.summarizers.base import Handles
from compaction.summarizers.fidelity import Fidelity, measure
from compaction.summarizers.handle_lines import pick_handles, render_handles
from compaction.summarizers.handles import KINDS, count, draw_handles
from compaction.summarizers.relations import KINDS as RELATION_KINDS
from compaction.summarizers.relations import Probe, Relations, check, draw_probes
from conversations.inputs import parse_message
from conversations.models import ContextItem, Conversation, Message, Summary, SummaryMessage
from conversations.services import messages_append
from core.token_estimate import estimate
from importers.services import import_file

USER = "lcm-eval-fidelity"
DEFAULT_SIZE = 2_700
AGENT = "(agent compaction)"
METHODS = (
    "lcm summary",
    "lcm compacted",
    "newest records",
    "agent summary",
    "names list",
    "uncompacted span",
    "model summary",
)


@dataclass
class Span:
    label: str
    messages: list[Message]
    agent_summary: str | None = None


@dataclass
class Cell:
    file: str
    span: str
    size: int
    method: str
    tokens: int
    fidelity: Fidelity
    seconds: float = 0.0
    relations: Relations = field(default_factory=Relations)
    path: str = ""  # model summary: what the gate did (SummaryFidelity.path)
    size_rank: int = 1  # 1: the span's first size, 2: twice it

    def row(self) -> str:
        kinds = " | ".join(_ratio(self.fidelity.kept.get(kind)) for kind in KINDS)
        held = " | ".join(_ratio(self.relations.kept.get(kind)) for kind in RELATION_KINDS)
        method = f"{self.method} ({self.path})" if self.path else self.method
        return (
            f"| `{self.file}` | {self.span} | {self.size:,} | {method} | {self.tokens:,} "
            f"| **{_score(self.fidelity.score)}** | **{_score(self.relations.score)}** "
            f"| {kinds} | {held} |"
        )

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "span": self.span,
            "size": self.size,
            "method": self.method,
            "path": self.path,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            **self.fidelity.as_dict(),
            "relations": self.relations.as_dict(),
        }


HEADER = (
    "| file | span | size | method | tokens | handles kept | relations held | "
    + " | ".join(KINDS)
    + " | "
    + " | ".join(f"{kind} (relation)" for kind in RELATION_KINDS)
    + " |\n|"
    + "---|" * (7 + len(KINDS) + len(RELATION_KINDS))
)


def _score(score: float | None) -> str:
    return "—" if score is None else f"{score:.3f}"


def _ratio(pair: list[int] | None) -> str:
    return "—" if not pair else f"{pair[0]}/{pair[1]}"


@dataclass
class Evaluation:
    cells: list[Cell] = field(default_factory=list)
    handle_seconds: float = 0.0
    handle_tokens: int = 0
    summary_seconds: float = 0.0  # the deterministic summaries ("lcm summary")
    summary_messages: int = 0
    probes: dict[str, list[Probe]] = field(default_factory=dict)  # "file span" -> probes

    def cost_per_thousand_ms(self) -> float:
        """Drawing handles and measuring, in ms per 1,000 source tokens."""
        return 1000 * self.handle_seconds / max(1, self.handle_tokens) * 1000

    def summary_ms_per_thousand_messages(self) -> float:
        return 1000 * self.summary_seconds / max(1, self.summary_messages) * 1000

    def pooled(self) -> list[tuple[str, int, int, int]]:
        """(method, size rank, probes held, probes) over every span: size rank 1 is the
        first size of each span (the agent's summary size, else the default), 2 twice it."""
        sums: dict[tuple[str, int], list[int]] = {}
        for cell in self.cells:
            rank = 1 if cell.method in _SIZELESS else cell.size_rank
            pair = sums.setdefault((cell.method, rank), [0, 0])
            pair[0] += cell.relations.held
            pair[1] += cell.relations.total
        return [(method, rank, held, total) for (method, rank), (held, total) in sums.items()]

    def misses(self, method: str, limit: int = 3) -> dict[str, list[str]]:
        """Examples of the probes `method` missed, per kind."""
        found: dict[str, list[str]] = {}
        for cell in self.cells:
            if cell.method != method or getattr(cell, "size_rank", 1) != 1:
                continue
            for kind, subjects in cell.relations.missed.items():
                for subject in subjects:
                    if len(found.setdefault(kind, [])) < limit:
                        found[kind].append(f"{cell.file}: {subject}")
        return found

    def gate_paths(self) -> dict[str, int]:
        paths: dict[str, int] = {}
        for cell in self.cells:
            if cell.method == "model summary":
                paths[cell.path] = paths.get(cell.path, 0) + 1
        return paths


_SIZELESS = ("agent summary", "names list", "uncompacted span")


def main_conversation(path: Path, owner) -> Conversation | None:
    fmt = detect_format(path)
    if not fmt:
        return None
    report = import_file(format=fmt, path=path, owner=owner)
    ids = [c.conversation_id for c in report.conversations if c.conversation_id]
    conversations = Conversation.objects.filter(pk__in=ids).select_related("import_source")
    for conversation in conversations.order_by("pk"):
        meta = getattr(getattr(conversation, "import_source", None), "metadata", None) or {}
        if meta.get("line", "main") == "main":
            return conversation
    return None


def spans_of(conversation: Conversation) -> list[Span]:
    """One span per agent compaction (the messages it replaced), else the whole conversation."""
    spans = []
    agent = Summary.objects.filter(conversation=conversation, model__endswith=AGENT).order_by(
        "earliest_at", "pk"
    )
    for number, summary in enumerate(agent, start=1):
        ids = SummaryMessage.objects.filter(summary=summary).values_list("message_id", flat=True)
        messages = list(Message.objects.filter(pk__in=list(ids)).order_by("seq"))
        spans.append(Span(f"compaction {number}", messages, summary.content))
    if not spans:
        messages = list(conversation.messages.order_by("seq"))
        spans.append(Span("whole session", messages))
    return spans


def _sources(messages: list[Message]) -> list[SourceItem]:
    return [SourceItem.of_message(m) for m in messages]


def _newest_that_fit(messages: list[Message], size: int) -> str:
    kept, used = [], 0
    for message in reversed(messages):
        if used + message.token_count > size:
            break
        kept.append(message.content)
        used += message.token_count
    return "\n".join(reversed(kept))


def _one_summary(sources: list[SourceItem], handles: Handles, size: int) -> str:
    request = SummaryRequest(
        sources=sources, depth=0, target_tokens=size, level="normal", handles=handles
    )
    return DeterministicSummarizer().summarize(request).content


def _compacted(span: Span, owner, size: int, tag: str) -> str:
    """The context after `until_under` `size` on a scratch copy of the span."""
    conversation = Conversation.objects.create(
        owner=owner, session_id=f"fidelity-{tag}", token_budget=max(size * 2, 1)
    )
    inputs = [
        parse_message(
            {"role": m.role, "content": m.content, "created_at": m.created_at.isoformat()}
        )
        for m in span.messages
        if m.content.strip()  # a message of parts only (an image) has nothing to summarize
    ]
    for offset in range(0, len(inputs), 500):
        messages_append(conversation_id=conversation.pk, messages=inputs[offset : offset + 500])
    with override_settings(LCM_FRESH_TAIL_COUNT=0, LCM_COMPACTION_MAX_PASSES=10_000):
        compact_conversation(
            conversation_id=conversation.pk, mode="until_under", target_tokens=size
        )
    items = ContextItem.objects.filter(conversation=conversation).order_by("ordinal")
    return "\n".join(
        (item.summary.content if item.summary_id else item.message.content)
        for item in items.select_related("summary", "message")
    )


def evaluate_span(
    file: str,
    span: Span,
    sizes: list[int],
    owner,
    evaluation: Evaluation,
    model: Summarizer | None = None,
) -> list[Cell]:
    sources = _sources(span.messages)
    started = time.perf_counter()
    handles = draw_handles(sources)
    evaluation.handle_seconds += time.perf_counter() - started
    evaluation.handle_tokens += sum(m.token_count for m in span.messages)
    probes = draw_probes(sources)
    evaluation.probes[f"{file} {span.label}"] = probes
    cells = []

    def cell(method: str, text: str, size: int, rank: int, seconds=0.0, path="") -> Cell:
        measured_at = time.perf_counter()
        found = measure(text, handles)
        evaluation.handle_seconds += time.perf_counter() - measured_at
        tokens = estimate(text)
        made = Cell(file, span.label, size or tokens, method, tokens, found, seconds)
        made.relations, made.path, made.size_rank = check(text, probes), path, rank
        return made

    for rank, size in enumerate(sizes, start=1):
        texts = {
            "lcm summary": lambda size=size: _one_summary(sources, handles, size),
            "lcm compacted": lambda size=size: _compacted(
                span, owner, size, f"{file}-{span.label}-{size}-{time.time_ns()}"
            ),
            "newest records": lambda size=size: _newest_that_fit(span.messages, size),
        }
        for method, make in texts.items():
            started = time.perf_counter()
            text = make()
            seconds = time.perf_counter() - started
            if method == "lcm summary":
                evaluation.summary_seconds += seconds
                evaluation.summary_messages += len(sources)
            cells.append(cell(method, text, size, rank, seconds))
        if model is not None:
            started = time.perf_counter()
            outcome = _model_summary(model, sources, handles, size, owner)
            seconds = time.perf_counter() - started
            cells.append(cell("model summary", outcome.content, size, rank, seconds, outcome.path))
    if span.agent_summary is not None:
        cells.append(cell("agent summary", span.agent_summary, 0, 1))
    cells.append(cell("names list", _names(handles), 0, 1))
    cells.append(cell("uncompacted span", _span_text(sources), 0, 1))
    return cells


def _names(handles: Handles) -> str:
    """Every handle that is a name, a line per kind (decisions are sentences: left out)."""
    names = {kind: given for kind, given in handles.items() if kind != "decision"}
    return "\n".join(render_handles(pick_handles(names, 10**9, estimate)))


def _span_text(sources: list[SourceItem]) -> str:
    request = SummaryRequest(sources=sources, depth=0, target_tokens=1, level="normal")
    return render_sources(request)


def _model_summary(model: Summarizer, sources, handles: Handles, size: int, owner):
    """One model summary of the span at `size` through the engine's escalation and gate
    (the spend guard counts its calls on a scratch conversation)."""
    scratch = Conversation.objects.create(
        owner=owner, session_id=f"fidelity-model-{time.time_ns()}", token_budget=size * 2
    )
    return escalation.summarize(
        summarizer=model,
        sources=sources,
        source_tokens=sum(estimate(item.content) for item in sources),
        depth=0,
        target_tokens=size,
        previous_context=None,
        conversation_id=scratch.pk,
        handles=handles,
    )


def sizes_for(span: Span, size: int | None) -> list[int]:
    base = size or (estimate(span.agent_summary) if span.agent_summary else DEFAULT_SIZE)
    return [base, base * 2]


def run(
    paths: list[str], *, size: int | None = None, model: Summarizer | None = None
) -> tuple[Evaluation, dict[str, int]]:
    """Every session file under `paths` (or conversation id), every span; and per file the
    number of handles drawn. `model`: also a model summary of each span (`model summary`)."""
    owner, _ = get_user_model().objects.get_or_create(username=USER)
    evaluation = Evaluation()
    drawn: dict[str, int] = {}
    for name, conversation in _conversations(paths, owner):
        for span in spans_of(conversation):
            if not span.messages:
                continue
            drawn[f"{name} {span.label}"] = count(draw_handles(_sources(span.messages)))
            evaluation.cells.extend(
                evaluate_span(name, span, sizes_for(span, size), owner, evaluation, model)
            )
    return evaluation, drawn


def _conversations(paths: list[str], owner):
    for given in paths:
        if given.isdigit():
            conversation = Conversation.objects.filter(pk=int(given)).first()
            if conversation is not None:
                yield f"conversation {given}", conversation
            continue
        for path in session_files([Path(given)]):
            conversation = main_conversation(path, owner)
            if conversation is not None:
                yield path.name, conversation
