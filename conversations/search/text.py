"""Text helpers shared by the search backends: literal query forms, CJK detection,
snippets, and the required literal of a regex (for trigram prefiltering)."""

from __future__ import annotations

import re
import unicodedata

import regex

from conversations.search.query import (
    MARK_END,
    MARK_START,
    GrepHit,
    GrepQuery,
    InvalidPattern,
    Table,
    make_hit,
)

# Scripts written without spaces between words: a word-based full-text index keeps a
# whole run as one token, so these queries are answered by substring (trigram) search.
NO_SPACE_CLASS = (
    "[\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff]"
)  # the same ranges are in migration conversations/0004 (the gram index)
_NO_SPACE_SCRIPTS = re.compile(NO_SPACE_CLASS)

SNIPPET_CONTEXT = 80


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def needs_substring_search(query: str) -> bool:
    return bool(_NO_SPACE_SCRIPTS.search(query))


def unspaced_grams(words: list[str]) -> list[str]:
    """What the gram index (`content_cjk`, migration 0004) must hold for a row to contain
    every word: each pair of adjacent unspaced-script characters of a word, and each such
    character that has no neighbour of its script. Empty when no word has any."""
    grams: list[str] = []
    for word in words:
        runs = re.findall(f"{NO_SPACE_CLASS}+", word)
        for run in runs:
            if len(run) == 1:
                grams.append(run)
            grams.extend(run[i : i + 2] for i in range(len(run) - 1))
    return list(dict.fromkeys(grams))


def query_words(query: str) -> list[str]:
    return [w for w in query.split() if w]


def websearch_literal(query: str) -> str:
    """A websearch_to_tsquery input in which every character is literal: each word is
    quoted (so `-`, `or` and quotes lose their operator meaning); words are ANDed."""
    return " ".join('"' + w.replace('"', " ") + '"' for w in query_words(query))


def fts5_phrase(text: str) -> str:
    """`text` as one FTS5 string, every character literal."""
    return '"' + text.replace('"', '""') + '"'


def fts5_literal(query: str) -> str:
    """An FTS5 MATCH string that takes every character literally: each word a quoted string."""
    return " ".join(fts5_phrase(w) for w in query_words(query))


def compile_regex(pattern: str, ignore_case: bool) -> regex.Pattern:
    """The pattern for the `regex` package (whose matcher takes a timeout); a bad one is
    an InvalidPattern (400 invalid_regex)."""
    flags = regex.IGNORECASE if ignore_case else 0
    try:
        return regex.compile(pattern, flags | regex.VERSION0)
    except regex.error as error:
        raise InvalidPattern(
            f"invalid regular expression: {error}", extra={"field": "query"}
        ) from None


# A « or » in the content itself is shown as ‹ or › in a snippet, so that « and » in a
# snippet are always our markers and a client can render them without guessing.
# What SQLite's snippet() marks with, turned into « » once the content's own are replaced.
RAW_START, RAW_END = "\x02", "\x03"


def snippet_text(content: str) -> str:
    # Two str.replace calls: translate() with a mapping looks up every character in Python.
    return content.replace(MARK_START, "‹").replace(MARK_END, "›")


def from_raw_marks(snippet: str) -> str:
    """A snippet marked with RAW_START/RAW_END, with « » as the only markers."""
    return snippet_text(snippet).replace(RAW_START, MARK_START).replace(RAW_END, MARK_END)


def snippet_at(content: str, start: int, end: int, context: int = SNIPPET_CONTEXT) -> str:
    left = max(0, start - context)
    right = min(len(content), end + context)
    text = (
        ("…" if left > 0 else "")
        + snippet_text(content[left:start])
        + MARK_START
        + snippet_text(content[start:end])
        + MARK_END
        + snippet_text(content[end:right])
        + ("…" if right < len(content) else "")
    )
    return " ".join(text.split())


def snippet_for_words(content: str, words: list[str]) -> str:
    """Mark the first occurrence (case-insensitive) of the first word found."""
    folded = content.casefold()
    for word in words:
        at = folded.find(word.casefold())
        if at >= 0 and len(folded) == len(content):
            return snippet_at(content, at, at + len(word))
    return snippet_at(content, 0, 0)[1:] if content else ""


def substring_hits(table: Table, q: GrepQuery, rows, words: list[str]) -> list[GrepHit]:
    """Hits of a substring search, from rows (id, conversation_id, created_at, seq, depth,
    kind, content): each marked at its first word; every match scores alike."""
    score = 1.0 if q.sort == "relevance" else None
    return [
        make_hit(table, row[:6], snippet=snippet_for_words(row[6], words), score=score)
        for row in rows
    ]


def required_literal(pattern: str, ignore_case: bool, shortest: int = 3) -> str | None:
    """The longest run of plain characters every match must contain, or None.

    Reads the pattern with Python's own parser (Python's and the `regex` package's
    syntax agree on the constructs that matter here); anything it cannot read gets no
    prefilter, which is always correct, only slower."""
    try:
        import re._parser as sre_parse  # Python 3.11+
        from re._constants import LITERAL, SUBPATTERN
    except ImportError:  # pragma: no cover
        return None
    try:
        parsed = sre_parse.parse(pattern, re.IGNORECASE if ignore_case else 0)
    except Exception:
        return None
    best, current = "", []

    def flush():
        nonlocal best, current
        run = "".join(current)
        if len(run) > len(best):
            best = run
        current = []

    def walk(items):
        for op, arg in items:
            if op is LITERAL:
                current.append(chr(arg))
            elif op is SUBPATTERN and arg[1] == 0 and arg[2] == 0:
                walk(arg[3])  # a plain group: its literals are still required in sequence
            else:
                flush()

    walk(list(parsed))
    flush()
    # The trigram tokenizer folds case only for ASCII-like text; NFKC-different text is
    # safest left unfiltered.
    if len(best) < shortest or unicodedata.normalize("NFC", best) != best:
        return None
    return best


# --- Whole-match marks --------------------------------------------------------------


def split_marks(snippet: str) -> tuple[str, list[tuple[int, int]]] | None:
    """The snippet's text without markers and the marked spans in it, or None when the
    markers do not pair up (the content itself holds a « or »)."""
    text, spans, start = [], [], None
    length = 0
    for piece in re.split(f"([{MARK_START}{MARK_END}])", snippet):
        if piece == MARK_START:
            if start is not None:
                return None
            start = length
        elif piece == MARK_END:
            if start is None:
                return None
            spans.append((start, length))
            start = None
        else:
            text.append(piece)
            length += len(piece)
    if start is not None:
        return None
    return "".join(text), spans


def join_marks(text: str, spans: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for start, end in spans:
        out += [text[at:start], MARK_START, text[start:end], MARK_END]
        at = end
    out.append(text[at:])
    return "".join(out)


def _occurrences(text: str, words: list[str]) -> list[tuple[int, int]]:
    folded = text.casefold()
    if len(folded) != len(text):  # case folding changed lengths: offsets would not line up
        return []
    found = []
    for word in {w.casefold() for w in words}:
        at = folded.find(word)
        while at >= 0:
            found.append((at, at + len(word)))
            at = folded.find(word, at + 1)
    return found


def _part_of(marked: str, word: str) -> bool:
    part = marked.casefold().strip("-_./@:")
    return bool(part) and part != word and part in word


def whole_match_marks(snippet: str, words: list[str]) -> str:
    """Mark whole matches in a full-text snippet, the same on both backends.

    PostgreSQL's ts_headline marks the lexemes a hyphenated identifier is parsed into
    (`«RA»«-2198»-«NS»`), and both backends may mark a lone part of an identifier the
    query named whole. Each marked span is widened to every literal occurrence of a
    query word it touches; a span that touches none and is only a part of an identifier
    the query spelled with punctuation (`RA` of `RA-2198-NS`) is not a match, so it is
    unmarked; touching spans become one."""
    parsed = split_marks(snippet)
    if parsed is None or not words:
        return snippet
    text, spans = parsed
    occurrences = _occurrences(text, words)
    compound_words = [w.casefold() for w in words if re.search(r"[^\w]", w)]
    result = []
    for start, end in spans:
        touching = [(s, e) for s, e in occurrences if s <= end and e >= start]
        if touching:
            start = min([start, *(s for s, _ in touching)])
            end = max([end, *(e for _, e in touching)])
        elif any(_part_of(text[start:end], w) for w in compound_words):
            continue
        result.append((start, end))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(result):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return join_marks(text, merged)
