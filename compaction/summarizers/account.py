"""The account a deterministic summary gives of its span: statements (statements.py) picked
within a token budget and written as sections (sections.py).

A leaf draws its statements from its messages; a condensed summary reads them back from its
children's sections, so what happened survives the levels (the newest child's open work and
state stand for the older ones': an older child's open task may have been done since). The
picking goes round the kinds, the best of each kind first, so a small budget still says
what the user asked, what changed, what broke and what is open before it says more of any.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compaction.summarizers.budget import Estimator, truncate_to_tokens
from compaction.summarizers.sections import HEADINGS, bullet, read_sections, state_line
from compaction.summarizers.statements import Statement, draw_statements
from compaction.summarizers.words import content_words

if TYPE_CHECKING:
    from compaction.summarizers.base import SummaryRequest

# The order the kinds take turns in: where the work stands and what is still open first,
# then what the user asked, what broke, what changed, what was decided.
PRIORITY = ("state", "task", "request", "error", "file", "decision")
_LATEST_ONLY = ("state", "task")
_MIN_UNIT = 24  # tokens a statement may always take before it is cut


def statements_for(request: SummaryRequest, *, concise: bool = False) -> list[Statement]:
    """A leaf's statements drawn from its messages (`concise`: statements.draw_statements);
    a condensed summary's read from its children's sections, newest child first, each said
    once."""
    sources = request.sources
    if request.depth == 0:
        return draw_statements(sources, concise=concise)
    last = max(1, len(sources) - 1)
    kept: list[Statement] = []
    seen: set[str] = set()
    taken: set[str] = set()  # kinds only the newest child that has them speaks for
    for index in reversed(range(len(sources))):
        found = read_sections(sources[index].content, round(index / last, 4))
        for statement in found:
            key = " ".join(content_words(statement.text))
            if statement.kind in taken or key in seen:
                continue
            seen.add(key)
            kept.append(statement)
        taken |= {s.kind for s in found if s.kind in _LATEST_ONLY}
    return sorted(kept, key=lambda s: (PRIORITY.index(s.kind), -s.features.score))


def pick(statements: list[Statement], budget: int, estimator: Estimator) -> list[Statement]:
    """The statements that fit `budget` tokens as lines (headings included), taking turns
    over the kinds in `PRIORITY` order, the best of a kind first; a long one is cut to a
    fifth of the budget."""
    by_kind = {kind: [s for s in statements if s.kind == kind] for kind in PRIORITY}
    unit_cap = max(_MIN_UNIT, budget // 5)
    chosen: list[Statement] = []
    used = 0
    rounds = max((len(kept) for kept in by_kind.values()), default=0)
    for turn in range(rounds):
        for kind in PRIORITY:
            if turn >= len(by_kind[kind]):
                continue
            statement = _cut(by_kind[kind][turn], unit_cap, estimator)
            cost = _cost(statement, estimator)
            if kind in HEADINGS and not any(s.kind == kind for s in chosen):
                cost += estimator(HEADINGS[kind] + ":\n")
            if used + cost <= budget:
                chosen.append(statement)
                used += cost
    return chosen


def _cost(statement: Statement, estimator: Estimator) -> int:
    line = state_line(statement) if statement.kind == "state" else bullet(statement)
    return estimator(line + "\n")


def _cut(statement: Statement, cap: int, estimator: Estimator) -> Statement:
    """`statement` within `cap` tokens, cut at the end of its quote or clause; a closing
    remark in parentheses after a quote ("(not finished ...)") is kept."""
    if estimator(statement.text) <= cap:
        return statement
    text, remark = statement.text, ""
    if text.endswith(")") and '" (' in text:
        text, _, rest = text.rpartition('" (')
        text, remark = text + '"', " (" + rest
    text = truncate_to_tokens(text, max(1, cap - estimator(remark)), estimator, marker="…")
    text += remark
    return Statement(statement.kind, text, statement.refs, statement.subject, statement.features)
