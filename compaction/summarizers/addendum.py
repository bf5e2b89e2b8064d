"""The compaction addendum: what an agent's own compaction summary dropped that the
continuing work still needs, said as what happened, within a token budget.

    addendum = draw_addendum(sources, agent_summary, budget=1_500, header="...")
    addendum.text, addendum.items, addendum.before, addendum.after

`sources` are the messages the agent's summary replaced (stored whole), `agent_summary` the
text the agent wrote. The span's handles (handles.py) and relation probes (relations.py)
are measured in the agent's summary; what it left out is brought back by the span's own
statements (statements.py: which file changed how, which error was fixed by what or is
still open, what the user asked, which option was chosen and why, what is pending), chosen
greedily by what they bring back (handles the summary lost, probes it did not hold) and by
their rank (recency, recurrence, whether the user said it, whether it is still open). Lost
handles that no statement carries get a trace: what happened to them, in a clause (a file
read and not changed, a command and how its last run ended, an error and whether it was
seen passing after, the user's sentence that gave a number), each with the messages it
comes from (`msg:<seq>`, inside the agent compaction's summary id that `lcm_expand` and
`lcm_describe` take). Deterministic and pure: no database, no settings.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.summarizers.base import Handles, SourceItem
from compaction.summarizers.budget import Estimator
from compaction.summarizers.fidelity import Fidelity, measure, missing
from compaction.summarizers.handles import count, draw_handles
from compaction.summarizers.relations import Probe, Relations, check, draw_probes
from compaction.summarizers.statements import draw_statements
from compaction.summarizers.traces import BRIEF_LABELS, Tracer

DEFAULT_BUDGET = 1_500
_HANDLE_WEIGHT = 1.0  # per lost handle a line brings back
_PROBE_WEIGHT = 3.0  # per probe the summary missed that a line holds
_MAX_REFS = 3
# Shares of the room the lines of their own may take before the closing lines (lost
# handles said shortly under a label): the one that keeps most is used.
_LINE_SHARES = (1.0, 0.75, 0.55, 0.4)
# Trace tiers: what cannot be found again without its name first (docs/compaction.md).
_TRACE_TIER = {"error": 3.0, "number": 3.0, "file": 2.0, "command": 2.0, "url": 1.5}


@dataclass(frozen=True)
class Item:
    kind: str  # a statement's kind (request, file, ...) or "trace"
    text: str  # the line, refs included
    refs: tuple[str, ...]
    value: float  # what it was chosen by


@dataclass
class Addendum:
    text: str  # "" when the summary lost nothing that fits
    items: list[Item]
    tokens: int
    budget: int
    before: Fidelity  # the handles the agent's summary named
    after: Fidelity  # ... the summary and the addendum together
    relations_before: Relations
    relations_after: Relations
    left_out: int = 0  # lines that did not fit the budget
    lost: Handles = field(default_factory=dict)  # what the summary dropped

    def as_dict(self) -> dict:
        return {
            "tokens": self.tokens,
            "budget": self.budget,
            "items": [{"kind": i.kind, "text": i.text, "refs": list(i.refs)} for i in self.items],
            "left_out": self.left_out,
            "before": self.before.as_dict(),
            "after": self.after.as_dict(),
            "relations_before": self.relations_before.as_dict(),
            "relations_after": self.relations_after.as_dict(),
        }


def draw_addendum(
    sources: Sequence[SourceItem],
    summary: str,
    *,
    budget: int = DEFAULT_BUDGET,
    estimator: Estimator,
    header: str = "",
) -> Addendum:
    """The addendum to `summary` over `sources` within `budget` tokens (`header` included:
    the line that says what it is and where the originals are)."""
    handles = draw_handles(sources)
    probes = draw_probes(sources)
    before = measure(summary, handles)
    relations_before = check(summary, probes)
    lost = missing(handles, before)
    tracer = Tracer(sources, handles)
    lines = _statement_lines(sources) + _request_lines(tracer) + _trace_lines(tracer, lost)
    candidates = _candidates(lines, lost, relations_before.unheld, estimator)
    room = budget - (estimator(header + "\n") if header else 0)
    best: Addendum | None = None
    for share in _LINE_SHARES:
        chosen, left_out = _choose(candidates, int(room * share))
        got = set().union(*(c.handles for c in chosen)) if chosen else set()
        rest = {k: {n: t for n, t in v.items() if (k, n) not in got} for k, v in lost.items()}
        used = sum(c.cost for c in chosen)
        closing = _closing_lines(tracer, rest, room - used, estimator)
        items = [c.item for c in chosen] + closing
        text = "\n".join([header, *(item.text for item in items)]) if items else ""
        together = f"{summary}\n{text}"
        made = Addendum(
            text=text,
            items=items,
            tokens=estimator(text) if text else 0,
            budget=budget,
            before=before,
            after=measure(together, handles),
            relations_before=relations_before,
            relations_after=check(together, probes),
            left_out=left_out,
            lost=lost,
        )
        if best is None or _kept(made) > _kept(best) + 1e-9:
            best = made
        if not count(rest) or not left_out:
            break  # every lost handle is said, or every line fitted: less room cannot help
    return best


def _kept(addendum: Addendum) -> float:
    """What the summary and the addendum keep together: handles and probes, equally."""
    handles = addendum.after.score if addendum.after.score is not None else 1.0
    probes = addendum.relations_after.score
    return handles + (probes if probes is not None else 1.0)


def _refs_said(refs: Sequence[str]) -> str:
    shown = list(refs)[-_MAX_REFS:]
    more = len(refs) - len(shown)
    return "(" + ", ".join(shown) + (f", +{more} earlier" if more else "") + ")"


def _statement_lines(sources: Sequence[SourceItem]) -> list[Item]:
    return [
        Item(s.kind, f"- {s.sentence()} {_refs_said(s.refs)}", s.refs, s.features.score)
        for s in draw_statements(sources)
    ]


def _request_lines(tracer: Tracer) -> list[Item]:
    return [
        Item("request", f"- {text} ({ref})", (ref,), 1.0 + 2 * recency)
        for text, ref, recency in tracer.requests()
    ]


def _trace_lines(tracer: Tracer, lost: Handles) -> list[Item]:
    """A line per lost handle saying what happened to it (statements bring most back;
    these are for the rest), ranked by kind, recurrence and recency."""
    found = []
    for kind, names in lost.items():
        for position, (name, times) in enumerate(names.items()):
            said = tracer.trace(kind, name)
            if said is None:
                continue
            text, refs = said
            recency = (position + 1) / max(1, len(names))
            value = _TRACE_TIER.get(kind, 1.0) + min(2.0, times / 3) + recency
            found.append(Item("trace", f"- {text} {_refs_said(refs)}", refs, value))
    return found


def _closing_lines(tracer: Tracer, rest: Handles, room: int, estimator: Estimator) -> list[Item]:
    """The lost handles no line said, each said shortly under a label (what happened to it:
    changed, read, ran and how it ended, failed and whether it passed later), the most
    recurring and recent first, in what room is left."""
    ranked = sorted(
        (
            (-times, -position, kind, name)
            for kind, names in rest.items()
            for position, (name, times) in enumerate(names.items())
        )
    )
    groups: dict[str, list[str]] = {}
    for _, _, kind, name in ranked:
        said = tracer.brief(kind, name)
        if said is None:
            continue
        label, text = said
        cost = estimator(", " + text)
        if not groups.get(label):
            cost += estimator(f"- {BRIEF_LABELS[label]}: \n")
        if cost > room:
            continue
        groups.setdefault(label, []).append(text)
        room -= cost
    return [
        Item("closing", f"- {BRIEF_LABELS[label]}: {', '.join(groups[label])}", (), 0.0)
        for label in BRIEF_LABELS
        if groups.get(label)
    ]


@dataclass
class _Candidate:
    item: Item
    order: int
    handles: frozenset[tuple[str, str]]  # the lost handles its line names
    probes: frozenset[int]  # the missed probes (by position) its line holds
    cost: int


def _candidates(
    items: list[Item], lost: Handles, unheld: list[Probe], estimator: Estimator
) -> list[_Candidate]:
    """Each line with what it brings back, measured once: a cheap substring test picks the
    handles worth measuring exactly (fidelity.measure) in it."""
    keys = [(kind, name, _key(kind, name)) for kind, names in lost.items() for name in names]
    found = []
    for order, item in enumerate(items):
        lowered = item.text.lower()
        maybe: Handles = {}
        for kind, name, key in keys:
            if key in lowered:
                maybe.setdefault(kind, {})[name] = lost[kind][name]
        named = measure(item.text, maybe) if maybe else None
        handles = frozenset(
            (kind, name)
            for kind, names in maybe.items()
            for name in names
            if named is not None and name not in named.dropped.get(kind, ())
        )
        held = check(item.text, unheld).unheld if unheld else []
        probes = frozenset(n for n, probe in enumerate(unheld) if probe not in held)
        found.append(_Candidate(item, order, handles, probes, estimator(item.text + "\n")))
    return found


def _key(kind: str, name: str) -> str:
    """A lowered piece of `name` that any line naming it contains."""
    if kind == "file":
        return name.rstrip("/").rsplit("/", 1)[-1].lower()
    if kind == "command":
        return name.split()[0].lower()
    if kind == "decision":
        return ""
    return name.lower()


def _choose(candidates: list[_Candidate], room: int) -> tuple[list[_Candidate], int]:
    """Lazy greedy: the line worth most (what it brings back, then its rank) that still
    fits, its gain counted against what the lines already chosen brought back."""
    got_handles: set[tuple[str, str]] = set()
    got_probes: set[int] = set()

    def worth(c: _Candidate) -> float:
        gain = _HANDLE_WEIGHT * len(c.handles - got_handles)
        gain += _PROBE_WEIGHT * len(c.probes - got_probes)
        return c.item.value + gain if gain else 0.0

    heap = [(-worth(c), c.order, c) for c in candidates]
    heapq.heapify(heap)
    chosen: list[_Candidate] = []
    left_out = 0
    while heap:
        _, order, candidate = heapq.heappop(heap)
        now = worth(candidate)
        if not now:  # brings nothing back the summary and earlier lines lack
            continue
        if heap and -now > heap[0][0]:  # another may be worth more now
            heapq.heappush(heap, (-now, order, candidate))
            continue
        if candidate.cost > room:
            left_out += 1
            continue
        room -= candidate.cost
        chosen.append(candidate)
        got_handles |= candidate.handles
        got_probes |= candidate.probes
    return sorted(chosen, key=lambda c: c.order), left_out
