"""Search terms: the words of a text as the BM25 leg of search counts them.

Any word (a run of letters and digits), lower-cased, stop words out, Snowball-stemmed
("hiking" and "hikes" are one term). Pure functions: both databases get the same terms
from the same text, so the BM25 leg ranks the same on SQLite and PostgreSQL.

Also: the speaker label a transcript line starts with, and the speakers a question names
(memory.recall asks without them).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"\w+", re.UNICODE)
_STEMMER = snowballstemmer.stemmer("english")
# Words no search counts (in these terms, and in memory.fulltext's database query).
STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "tell",
        "know",
        "remember",
        "recall",
        "say",
        "said",
    ]
)


def stem(word: str) -> str:
    # A number is its own stem (the English stemmer only rewrites letters): skipping it
    # keeps a transcript's many distinct numbers from missing and evicting the word cache
    # (100,000 numbered lines made the search cache's first fill 3x slower).
    if word.isascii() and word.isdigit():
        return word
    return _stem_word(word)


@lru_cache(maxsize=200_000)
def _stem_word(word: str) -> str:
    return _STEMMER.stemWord(word)


def terms(text: str) -> list[str]:
    """Every term of `text`, in order, repeats kept (term frequencies count them)."""
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in STOP_WORDS]


def term_counts(text: str) -> tuple[Counter, int]:
    found = terms(text)
    return Counter(found), len(found)


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order."""
    return list(dict.fromkeys(terms(text)))


_SPEAKER = re.compile(r"^\s*([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,3}):\s")


def speaker_label(text: str) -> str | None:
    """The speaker a transcript line names at its start ("Ana Lopez: I adopted…"), if any."""
    match = _SPEAKER.match(text)
    return match.group(1) if match else None


def speakers_named(question: str, names: list[str]) -> tuple[set[int], str]:
    """The indexes of `names` the question names (the full name or its first word, whole
    words, any case), and the question with those names taken out."""
    named, rest = set(), question
    asked = set(_WORD.findall(question.lower()))
    for index, name in enumerate(names):
        if name.split()[0].lower() not in asked:
            continue  # cheap test first: a transcript may hold many labels
        words = [re.escape(w) for w in name.split()]
        pattern = re.compile(
            r"\b(?:"
            + r"\s+".join(words)
            + (r"|" + words[0] if len(words) > 1 else "")
            + r")(?:'s|’s)?\b",
            re.IGNORECASE,
        )
        if pattern.search(rest):
            named.add(index)
            rest = pattern.sub(" ", rest)
    return named, " ".join(rest.split())
