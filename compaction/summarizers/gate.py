"""The fidelity gate's last step for model summaries (docs/compaction.md, "The gate").

When a model summary still names too few of its sources' handles after one retry, the
handles it leaves out are appended as compact labelled lines (handle_lines), ranked, before
its closing "Expand for details about:" line, within the target: the prose keeps what room
the list does not need, and at least half of the target; a prose longer than that is cut.
So the gate never makes a summary longer than its target.
"""

from __future__ import annotations

from compaction.summarizers.base import Handles
from compaction.summarizers.budget import Estimator, truncate_to_tokens
from compaction.summarizers.fidelity import measure, missing
from compaction.summarizers.handle_lines import handle_lines_cost, pick_handles, render_handles
from compaction.summarizers.markers import EXPAND_PREFIX
from compaction.summarizers.output import split_expand_line


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
