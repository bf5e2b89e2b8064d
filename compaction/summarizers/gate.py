"""The fidelity gate on model summaries (docs/compaction.md, "The gate"): its criteria, and
its last step for handles.

`GateCriteria.judge(text)` measures a model summary twice: the share of its sources'
handles it names (fidelity.py) and, for a leaf, the share of its span's relation probes it
holds (relations.py: which file changed how, which error was fixed by what, what the user
asked, what was chosen and why, what is open). The engine (compaction/escalation.py) asks
once more for what is missing and, when the relations are still short, puts the
deterministic summary in its place.

When a model summary still names too few of its sources' handles after one retry, the
handles it leaves out are appended as compact labelled lines (handle_lines), ranked, before
its closing "Expand for details about:" line, within the target: the prose keeps what room
the list does not need, and at least half of the target; a prose longer than that is cut.
So the gate never makes a summary longer than its target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from compaction.summarizers.base import Handles
from compaction.summarizers.budget import Estimator, truncate_to_tokens
from compaction.summarizers.fidelity import Fidelity, measure, missing
from compaction.summarizers.handle_lines import handle_lines_cost, pick_handles, render_handles
from compaction.summarizers.markers import EXPAND_PREFIX
from compaction.summarizers.output import split_expand_line
from compaction.summarizers.relations import Probe, Relations, check, draw_probes

if TYPE_CHECKING:
    from compaction.summarizers.base import SummaryRequest


@dataclass
class Verdict:
    fidelity: Fidelity
    relations: Relations
    min_handles: float
    min_relations: float
    handles: Handles

    @property
    def handles_pass(self) -> bool:
        score = self.fidelity.score
        return self.min_handles <= 0 or score is None or score >= self.min_handles

    @property
    def relations_pass(self) -> bool:
        score = self.relations.score
        return self.min_relations <= 0 or score is None or score >= self.min_relations

    @property
    def passes(self) -> bool:
        return self.handles_pass and self.relations_pass

    @property
    def rank(self) -> tuple:
        """Better first when compared: relations held, then handles named."""
        relations = 1.0 if self.relations.score is None else self.relations.score
        handles = 1.0 if self.fidelity.score is None else self.fidelity.score
        return (self.relations_pass, self.handles_pass, relations, handles)

    @property
    def missing_handles(self) -> Handles:
        return missing(self.handles, self.fidelity)

    @property
    def missing_relations(self) -> tuple[str, ...]:
        return tuple(probe.ask() for probe in self.relations.unheld)

    def describe(self) -> str:
        parts = []
        if self.fidelity.score is not None:
            parts.append(f"fidelity {self.fidelity.score:.2f} (min {self.min_handles:g})")
        if self.relations.score is not None:
            parts.append(f"relations {self.relations.score:.2f} (min {self.min_relations:g})")
        return ", ".join(parts) or "nothing to measure"


class GateCriteria:
    """What a model summary must keep: `min_handles` of the handles and `min_relations` of
    the relation probes (a leaf's; a condensed summary's sources are summaries, which give
    no probes); 0 turns either off."""

    def __init__(
        self, min_handles: float, min_relations: float, handles: Handles, request: SummaryRequest
    ) -> None:
        self.min_handles, self.min_relations, self.handles = min_handles, min_relations, handles
        wanted = min_relations > 0 and request.depth == 0
        self.probes: list[Probe] = draw_probes(request.sources) if wanted else []

    def judge(self, text: str) -> Verdict:
        return Verdict(
            measure(text, self.handles),
            check(text, self.probes),
            self.min_handles,
            self.min_relations,
            self.handles,
        )


def append_missing(content: str, handles: Handles, target: int, estimator: Estimator) -> str:
    """`content` with the handles it does not name appended, within `target` tokens."""
    body, named = split_expand_line(content)
    closing = f"{EXPAND_PREFIX} {named}" if named else ""
    room = target - (estimator(closing + "\n") if closing else 0)
    left = missing(handles, measure(body, handles))
    if not left or room <= 0:
        return content if estimator(content) <= target else truncate_to_tokens(content, target)
    wanted = handle_lines_cost(pick_handles(left, room, estimator, among=handles), estimator)
    prose_room = max(room - wanted, room // 2) - 1
    if estimator(body) > prose_room:
        body = truncate_to_tokens(body, prose_room, estimator)
        left = missing(handles, measure(body, handles))
    block = pick_handles(left, room - estimator(body + "\n"), estimator, among=handles)
    text = "\n".join(part for part in (body, *render_handles(block), closing) if part)
    if estimator(text) > target:  # only with an estimator that is not subadditive
        text = truncate_to_tokens(text, target, estimator)
    return text
