"""Questions about the order of events (issue 47; docs/memory.md, "The order of events").

"Can you list the order in which I brought up different aspects of my budget tracker
throughout our conversations? Mention ONLY three items." Its evidence is every message,
across the whole conversation, in which the asker brought the topic up: several messages,
one or two per session, all the user's. Ranked as any question, the framing words
("order", "brought up", "aspects", "conversations", "items") are half of what both legs
match, and the best matches crowd into one session, so the later mentions never make the
first rows. So, for such a question (`ordering_question`):

- **The topic alone** is searched (`topic_of`): the framing is cut, so both legs rank by
  what the events are about.
- **The asker's own messages**, when the question is about what "I" said, brought up or
  asked (`about_own_words`): every unit of the other side's messages is left out (the
  product knows each message's role).
- **Spread over the sessions** (`spread_by_session`): messages are taken best first, each
  losing SESSION_PENALTY (in z units of the ranking) for every message already taken from
  its session, so each session's best mention comes up before a second one of the same
  session. A session is a run of messages without a gap of SESSION_GAP_SECONDS (every
  message's time is known). The rows stay in rank order; each carries its `created_at`
  and `seq`, which is the order a reader reports.
"""

from __future__ import annotations

import re

import numpy as np

# A pause this long between two messages starts a new session.
SESSION_GAP_SECONDS = 30 * 60
# What a message loses per message already taken from its session (z units of the ranking).
SESSION_PENALTY = 1.0

_ORDERING = re.compile(
    r"\b(?:in (?:what|which) order|the order (?:in which|of)|order in which|"
    r"(?:list|walk me through|describe|recall|tell me) (?:\w+ )?in order|in the order|"
    r"chronolog\w*|sequence of|what (?:came|happened) first|which came first)\b",
    re.IGNORECASE,
)
_OWN_WORDS = re.compile(
    r"\b(?:I|me)\b(?: \w+){0,2} (?:brought up|bring up|mentioned|mention|asked|raised|"
    r"talked about|discussed|shared|told you|said|worked on|worked through|tackled|covered)\b",
    re.IGNORECASE,
)
# The framing of an ordering question, cut before the topic is searched (in this order).
_FRAMING = [
    r"\bmention only(?: and only)? \w+ (?:items?|things?|points?|events?)\b.*$",
    r"^\s*(?:can|could|would|will) you (?:please )?",
    r"\b(?:list|walk me through|describe|outline|recall|tell me|give me|go over)\b",
    r"\b(?:in (?:what|which) order|the order (?:in which|of)|order in which|in the order|"
    r"in order|chronolog\w*(?: order)?|the sequence (?:of|in which)|sequence of)\b",
    r"\b(?:how|when|where)?\s*(?:I|me)\b(?: \w+){0,2} (?:brought up|bring up|mentioned|mention|"
    r"asked(?: about)?|raised|talked about|discussed|shared|told you about|said|"
    r"worked on|worked through|tackled|covered)\b",
    r"\b(?:the )?(?:different|various|several|specific|key|main)?\s*"
    r"(?:aspects|topics|parts|things|items|concepts|points|steps|stages|issues|areas|"
    r"elements|features|components)\s+(?:of|related to|about|regarding|for|in)\b",
    r"\b(?:throughout|across|during|over|in) (?:all )?(?:of )?(?:our|the|my) "
    r"(?:conversations?|chats?|sessions?|discussions?|exchanges?)\b",
    r"\bin order\b",
]
_FRAMING_RE = [re.compile(pattern, re.IGNORECASE) for pattern in _FRAMING]


def ordering_question(question: str) -> bool:
    """Does the question ask in what order things happened (or were brought up)?"""
    return bool(_ORDERING.search(question))


def about_own_words(question: str) -> bool:
    """Is it about what the asker (the user) said, brought up or asked?"""
    return bool(_OWN_WORDS.search(question))


def topic_of(question: str) -> str:
    """The question without an ordering question's framing; the question itself when
    nothing would be left."""
    topic = question
    for pattern in _FRAMING_RE:
        topic = pattern.sub(" ", topic)
    topic = " ".join(re.sub(r"\s+([,?.!])", r"\1", topic).split()).strip(" ,?.!")
    return topic if len(re.findall(r"\w+", topic)) >= 2 else question


def sessions_of(times: np.ndarray, conversations: np.ndarray, seqs: np.ndarray) -> np.ndarray:
    """A session number for each message (given by its time, conversation and seq): a new
    session starts at a new conversation or after a pause of SESSION_GAP_SECONDS."""
    if times.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((seqs, conversations))
    starts = np.ones(times.size, dtype=bool)
    ordered_times, ordered_conversations = times[order], conversations[order]
    starts[1:] = (ordered_conversations[1:] != ordered_conversations[:-1]) | (
        np.diff(ordered_times) >= SESSION_GAP_SECONDS
    )
    sessions = np.empty(times.size, dtype=np.int64)
    sessions[order] = np.cumsum(starts) - 1
    return sessions


def spread_by_session(
    score: np.ndarray, sessions: np.ndarray, k: int, pool: int = 400
) -> list[int]:
    """The `k` best messages by `score`, each losing SESSION_PENALTY for every message
    already taken from its session (module doc); indexes into `score`, best first. Only
    the `pool` best by score are considered (a message further down never climbs in)."""
    finite = np.flatnonzero(np.isfinite(score))
    if finite.size == 0 or k <= 0:
        return []
    take = min(finite.size, max(pool, k))
    candidates = finite[np.argpartition(-score[finite], take - 1)[:take]]
    candidates = candidates[np.argsort(-score[candidates], kind="stable")]
    adjusted = score[candidates].astype(np.float64)
    _, session_of = np.unique(sessions[candidates], return_inverse=True)
    picked: list[int] = []
    for _ in range(min(k, candidates.size)):
        best = int(np.argmax(adjusted))
        picked.append(int(candidates[best]))
        adjusted[session_of == session_of[best]] -= SESSION_PENALTY
        adjusted[best] = -np.inf
    return picked
