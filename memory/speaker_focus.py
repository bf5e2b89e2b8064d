"""A question about one speaker is answered from that speaker's lines (issue 47, multi-hop;
docs/memory.md, "Questions about one speaker").

"What video games did Aqib play?", "What are Kate's hobbies?": the evidence is two to nine
messages over several sessions, and nearly all of it is the named speaker's own lines
(REALTALK's multi-hop questions naming one speaker: 96% of the evidence hybrid found and
89% of what it missed), while half of the rows it returned were the other speaker's
(57% the named one's, against 51% of all messages). The name itself is taken out of the
question before it is searched (memory.recall._without_speakers: every line of theirs
carries it), so neither leg knew whose lines to prefer, and the other speaker's replies on
the same topic ("Did you play Smite too?") pushed the second and third mention of the
named speaker out of the budget.

So, in hybrid search, when the question names exactly one of the speakers in scope (and
the scope holds another), every message of that speaker gains LCM_SEARCH_SPEAKER_WEIGHT
(z units of the message ranking). A bonus, not a filter: the other side's line that
answers ("Aqib told me he plays Smite") can still rank, and a filter measured lower
(docs/benchmarks.md). A question naming both speakers, or none, is ranked as before; a
transcript without speaker labels (a user-assistant chat) is untouched.
"""

from __future__ import annotations

import numpy as np

from memory.message_rank import Messages
from memory.vectors.numpy_exact import UnitMatrix


def speaker_focus(
    score: np.ndarray,
    matrix: UnitMatrix,
    rows: np.ndarray,
    messages: Messages,
    named: set[int],
    weight: float,
) -> np.ndarray:
    """`score` (one per message) with the named speaker's messages raised by `weight`;
    unchanged unless the question names exactly one speaker and the scope holds another."""
    if weight <= 0 or len(named) != 1 or messages.count == 0:
        return score
    speaker = next(iter(named))
    first = rows[messages.order[messages.starts]]  # one unit of each message
    theirs = matrix.speakers[first] == speaker
    if theirs.all() or not theirs.any():
        return score  # no one else speaks here: nothing to prefer
    return score + weight * theirs
