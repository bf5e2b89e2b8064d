"""`lcm_eval fidelity --repair PATH...`: what an agent's own compaction keeps, alone and with
the addendum the product hands back (docs/benchmarks.md, "Repair after the agent's
compaction"), beside the product's own compaction at the same total size, in one run.

Each session file is imported and cut into spans as `lcm_eval fidelity` does (the messages
each agent compaction replaced, else the whole main conversation). Per span:

* `agent summary`: the agent's own compaction summary over the span; where the file holds
  none, a stand-in: what a careless model writes at Claude Code's usual summary size (the
  recording upstream's composition, benchmarks/recording_upstream.py), said in the row;
* `agent + addendum`: that summary with the addendum (`compaction.summarizers.addendum`,
  the same code the hooks hand back, in `--budget` tokens, default the setting);
* `lcm compacted`: the context after `until_under` the same total size on a scratch copy of
  the span (the product's summary DAG);
* `lcm summary`: one deterministic summary of the span at that total size.

Each text is measured for the span's handles and relation probes; the report pools them
over every span, gives the addendum's token cost, and says which kinds still miss.

Writes under the user `lcm-eval-fidelity`: use a scratch database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model

from benchmarks import fidelity
from benchmarks.recording_upstream import compose
from compaction.summarizers import SummaryRequest
from compaction.summarizers.addendum import draw_addendum
from compaction.summarizers.fidelity import Fidelity, measure
from compaction.summarizers.handles import draw_handles
from compaction.summarizers.prompts import user_prompt
from compaction.summarizers.relations import Relations, check, draw_probes
from core.token_estimate import estimate

STAND_IN_SIZE = 2_700  # tokens: Claude Code's usual summary (docs/benchmarks.md, Fidelity)
HEADER = (
    "[lcm] Your compaction summary left out what follows (the messages it replaced are kept "
    "whole as summary sum_0123456789abcdef: `lcm_expand` summary_id=sum_0123456789abcdef "
    "include_messages=true brings back the exact originals; msg:N is a message's number). "
    "Each line says what happened:"
)
METHODS = ("agent summary", "agent + addendum", "lcm compacted", "lcm summary")


@dataclass
class Row:
    file: str
    span: str
    method: str
    tokens: int
    fidelity: Fidelity
    relations: Relations
    stand_in: bool = False
    addendum_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {
            "file": self.file,
            "span": self.span,
            "method": self.method,
            "tokens": self.tokens,
            "stand_in": self.stand_in,
            "addendum_tokens": self.addendum_tokens,
            "seconds": round(self.seconds, 3),
            **self.fidelity.as_dict(),
            "relations": self.relations.as_dict(),
        }


@dataclass
class RepairEvaluation:
    rows: list[Row] = field(default_factory=list)
    budget: int = 0

    def pooled(self, method: str) -> tuple[float | None, float | None]:
        """(handles named, probes held) over every span, as shares."""
        rows = [row for row in self.rows if row.method == method]
        named = sum(row.fidelity.named for row in rows)
        total = sum(row.fidelity.total for row in rows)
        held = sum(row.relations.held for row in rows)
        probes = sum(row.relations.total for row in rows)
        return (named / total if total else None, held / probes if probes else None)

    def by_kind(self, method: str) -> dict[str, list[int]]:
        """Handles and probes per kind, pooled: kind -> [kept, total]."""
        found: dict[str, list[int]] = {}
        for row in self.rows:
            if row.method != method:
                continue
            for kind, (kept, total) in row.fidelity.kept.items():
                pair = found.setdefault(kind, [0, 0])
                pair[0], pair[1] = pair[0] + kept, pair[1] + total
            for kind, (held, total) in row.relations.kept.items():
                pair = found.setdefault(f"{kind} (relation)", [0, 0])
                pair[0], pair[1] = pair[0] + held, pair[1] + total
        return found

    def addendum_costs(self) -> list[int]:
        return [row.addendum_tokens for row in self.rows if row.method == "agent + addendum"]


def stand_in_summary(sources) -> str:
    request = SummaryRequest(sources=sources, depth=0, target_tokens=STAND_IN_SIZE, level="normal")
    return compose(user_prompt(request))


def evaluate_span(file: str, span: fidelity.Span, owner, budget: int) -> list[Row]:
    sources = [fidelity.SourceItem.of_message(m) for m in span.messages]
    handles, probes = draw_handles(sources), draw_probes(sources)
    stand_in = span.agent_summary is None
    summary = stand_in_summary(sources) if stand_in else span.agent_summary
    started = time.perf_counter()
    addendum = draw_addendum(sources, summary, budget=budget, estimator=estimate, header=HEADER)
    seconds = time.perf_counter() - started
    together = f"{summary}\n{addendum.text}" if addendum.text else summary
    total = estimate(together)
    texts = {
        "agent summary": summary,
        "agent + addendum": together,
        "lcm compacted": fidelity._compacted(span, owner, total, f"repair-{file}-{time.time_ns()}"),
        "lcm summary": fidelity._one_summary(sources, handles, total),
    }
    return [
        Row(
            file,
            span.label,
            method,
            estimate(text),
            measure(text, handles),
            check(text, probes),
            stand_in,
            addendum.tokens if method == "agent + addendum" else 0,
            seconds if method == "agent + addendum" else 0.0,
        )
        for method, text in texts.items()
    ]


def run(paths: list[str], *, budget: int | None = None) -> RepairEvaluation:
    owner, _ = get_user_model().objects.get_or_create(username=fidelity.USER)
    budget = budget or settings.LCM_REPAIR_TOKEN_BUDGET
    evaluation = RepairEvaluation(budget=budget)
    for name, conversation in fidelity._conversations(paths, owner):
        for span in fidelity.spans_of(conversation):
            if span.messages:
                evaluation.rows.extend(evaluate_span(name, span, owner, budget))
    return evaluation
