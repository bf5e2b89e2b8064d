"""Text-level extraction: code blocks, sentences, the facts in a sentence and what it is worth.

Speed matters (a 20k-token chunk must be analysed in a few milliseconds), and one Python
`re` pass over 80k characters costs about a millisecond whatever the pattern. So there are
few passes: all sentences of a source are scanned as one text, each kind of fact has one
small pattern that runs only when a substring test says it may match, and keyword phrases
are found with `str.find`. Nothing here knows about requests or budgets.
"""

from __future__ import annotations

import re
import string
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Weight of each kind of signal; a sentence scores the sum over the kinds it contains
# (each kind counted once, so long sentences do not win by length).
WEIGHTS = {
    "decision": 6,
    "todo": 5,
    "fileref": 5,
    "question": 4,
    "error": 3,
    "url": 3,
    "path": 3,
    "ident": 2,
    "sumref": 2,
    "tool": 2,
    "number": 1,
}

# Entity kinds worth listing as key facts, in display order, with their labels.
FACT_LABELS = {
    "fileref": "Stored files",
    "path": "Files",
    "url": "URLs",
    "error": "Errors",
    "ident": "Identifiers",
    "tool": "Tools",
}

# Extensions that make "name.ext" a file name rather than a sentence's "end.Next".
_EXTENSION_WORDS = """
    py pyi js mjs cjs ts tsx jsx json jsonl yaml yml toml md rst txt rs go java kt c h cc cpp
    hpp cs rb php sh bash zsh sql html htm css scss cfg ini conf lock env csv tsv log xml proto
    tf ipynb pdf png jpg jpeg gif svg zip gz tar whl dockerfile
"""
EXTENSIONS = frozenset(_EXTENSION_WORDS.split())

# ASCII word boundaries, so an identifier glued to CJK text ("使用PostgreSQL而") is found.
_A = re.ASCII
_URL = re.compile(r"https?://[^\s<>\"'`)\]]+", _A)
_FILEREF = re.compile(r"\bfile_[0-9a-z]{6,}\b", _A)
_SUMREF = re.compile(r"\bsum_[0-9a-f]{16}\b", _A)
_SLASHED = re.compile(r"[\w.@+~-]*/[\w.@+/-]*\w/?", _A)
_DOTTED = re.compile(r"\b[\w-]+(?:\.[\w-]+)+", _A)
_BACKTICKED = re.compile(r"`([^`\n]{1,60})`")
_CALL = re.compile(r"\b[A-Za-z_][\w.]*\(\)", _A)
_WORDISH = re.compile(r"\b[A-Za-z]\w*_\w+|\b[a-z]+[A-Z]\w*|\b[A-Z][a-z0-9]+[A-Z]\w*", _A)
_HASH = re.compile(r"\b[0-9a-f]{7,40}\b", _A)
_NUMBER = re.compile(r"\d+", _A)
_ERROR_HINTS = ("Error", "Exception", "Warning", "Fault", "Failure", "Traceback", "HTTP ", "exit ")
_ERROR = re.compile(
    r"(?<!\w)(?:[A-Z]\w*(?:Error|Exception|Warning|Fault|Failure)|Traceback"
    r"|HTTP [45]\d\d|exit (?:code|status) [1-9]\d*)(?!\w)",
    _A,
)
_TOOL = re.compile(
    r"\btool[_ ](?:use|call|result)s?\b[ \t:=\"'`]+(?:name[ \t:=\"']+)?([A-Za-z_][\w.-]{0,63})"
    r"|\bcall(?:s|ed|ing)?[ \t]+(?:the[ \t]+)?`?([A-Za-z_][\w.-]{0,63})`?[ \t]+tool\b"
    r"|\[tool(?:_use|_call|_result)?[: \t]+([A-Za-z_][\w.-]{0,63})"
    r"|<tool_use\b[^>]*\bname=\"([^\"]{1,64})\"",
    re.IGNORECASE | _A,
)


def _phrases(text: str) -> list[tuple[str, bool]]:
    """Lowercase phrases ("a|b c|d"), found with str.find; ASCII ones only as whole words."""
    return [(phrase, phrase.isascii()) for phrase in text.split("|")]


_PHRASES = {
    "decision": _phrases(
        "decide|decided|deciding|decision|we'll|we will|we should|we are going to|let's|let us|"
        "go with|going with|instead|agreed|settled on|chose|opted|switch to|switched to|"
        "switching to|the plan is|the fix is|resolved by|rather than|from now on|don't use|"
        "never use|always use|决定|決定|改用|采用|採用|결정"
    ),
    "todo": _phrases("todo|fixme|next step|follow-up|follow up|action item|[ ]|待办|待辦|下一步"),
    "error": _phrases("panic|panicked|segfault|enoent|eacces|eperm|econnrefused|etimedout|oom"),
}

_FENCE_OPEN = re.compile(r"[ \t]*(```|~~~)[ \t]*([\w+#.-]*)")
_DEFINITION = re.compile(
    r"^\s*(?:export\s+)?(?:async\s+)?(?:def|class|function|fn|func|interface|struct|enum|trait|type)"
    r"\s+([A-Za-z_]\w*)",
    re.M,
)
_SENTENCE_BREAK = re.compile(r"[.!?][ \t]+|[。！？]|\n")
_LINE_MARKUP = re.compile(r"(?:[-*•>]+|#{1,6}|\d{1,3}[.)])\s+")
_ERROR_LINE = re.compile(r"(?i)error|exception|\bfail(?:ed|ure|s)?\b|\bfatal\b|\bdenied\b|\bpanic")
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_TRAILING = ".,;:!?"
_WORD = re.compile(r"\w")

# Reclassifies a match (for example "a/b" is not a path), or rejects it with None.
Keep = Callable[[str], str | None]


@dataclass(frozen=True)
class CodeBlock:
    language: str
    lines: int
    names: tuple[str, ...]  # functions and classes it defines


@dataclass
class Signals:
    score: int = 0
    kinds: set[str] = field(default_factory=set)
    entities: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)


def split_code(text: str) -> tuple[str, list[CodeBlock]]:
    """The prose of `text` (fenced code blocks removed) and a description of each block."""
    if "```" not in text and "~~~" not in text:
        return text, []
    prose: list[str] = []
    blocks: list[CodeBlock] = []
    fence, language, body = "", "", []
    for line in text.splitlines():
        if not fence:
            opening = _FENCE_OPEN.match(line)
            if opening:
                fence, language, body = opening.group(1), opening.group(2), []
            else:
                prose.append(line)
        elif line.strip() == fence:
            blocks.append(_code_block(language, body))
            fence = ""
        else:
            body.append(line)
    if fence:  # unterminated: the rest was code
        blocks.append(_code_block(language, body))
    return "\n".join(prose), blocks


def _code_block(language: str, body: list[str]) -> CodeBlock:
    names = tuple(dict.fromkeys(_DEFINITION.findall("\n".join(body))))[:4]
    return CodeBlock(language, len(body), names)


def sentences(prose: str) -> list[str]:
    """Sentences and lines of `prose`, markdown bullets and headings stripped."""
    units: list[str] = []
    start = 0
    for match in _SENTENCE_BREAK.finditer(prose):
        at = match.start()
        _add_sentence(units, prose[start : at if prose[at] == "\n" else at + 1])
        start = match.end()
    _add_sentence(units, prose[start:])
    return units


def _add_sentence(units: list[str], piece: str) -> None:
    piece = piece.strip()
    markup = _LINE_MARKUP.match(piece)
    if markup:
        piece = piece[markup.end() :]
    if len(piece) > 1:
        units.append(piece)


def score_sentences(units: list[str]) -> list[Signals]:
    """The facts in each sentence and its score.

    The sentences are scanned as one text; each match is credited to the sentence it starts
    in. A match read as a URL, path or identifier is blanked (same length, so offsets hold)
    before the next pass, so the parts of `src/app_config.py` do not count again.
    """
    found = _SentenceScan(units)
    _scan_entities(found)
    _scan_numbers_and_phrases(found)
    for unit, signals_of_unit in zip(units, found.results, strict=True):
        if unit.endswith(("?", "？")):
            signals_of_unit.kinds.add("question")
        signals_of_unit.score = sum(WEIGHTS[kind] for kind in signals_of_unit.kinds)
    return found.results


class _SentenceScan:
    """The sentences as one text, blanked where a match was read, and what each holds."""

    def __init__(self, units: list[str]) -> None:
        self.text = "\n".join(units)
        self.starts: list[int] = []
        offset = 0
        for unit in units:
            self.starts.append(offset)
            offset += len(unit) + 1
        self.results = [Signals() for _ in units]

    def hit(self, kind: str, at: int, entity: str | None = None) -> None:
        """Credit `kind` (and `entity`, if it is a fact) to the sentence holding `at`."""
        found = self.results[bisect_right(self.starts, at) - 1]
        found.kinds.add(kind)
        if entity and kind in FACT_LABELS:
            found.entities.append((kind, entity))

    def scan(
        self,
        kind: str,
        pattern: re.Pattern[str],
        *,
        group: int = 0,
        blank: bool = True,
        keep: Keep | None = None,
    ) -> None:
        """Credit every match (that `keep` accepts, reclassified by it), then blank them."""
        spans = []
        for match in pattern.finditer(self.text):
            entity = match.group(group).strip().rstrip(_TRAILING)
            actual = keep(entity) if keep else kind
            if actual:
                self.hit(actual, match.start(), entity)
                spans.append(match.span())
        if blank and spans:
            self.text = _blanked(self.text, spans)


def _scan_entities(found: _SentenceScan) -> None:
    """URLs, tools, identifiers, references, paths and errors, in this order: a kind read
    earlier is blanked before a later pattern could read its parts. Each pattern runs only
    when a substring test on what is left says it may match."""
    if "://" in found.text:
        found.scan("url", _URL)
    if "tool" in found.text.lower():
        for match in _TOOL.finditer(found.text):
            found.hit("tool", match.start(), next(group for group in match.groups() if group))
    if "`" in found.text:
        found.scan("ident", _BACKTICKED, group=1)
    if "file_" in found.text:
        found.scan("fileref", _FILEREF)
    if "sum_" in found.text:
        found.scan("sumref", _SUMREF)
    if "/" in found.text:
        found.scan("path", _SLASHED, keep=_path_kind)
    if "()" in found.text:
        found.scan("ident", _CALL)
    if "." in found.text:
        found.scan("path", _DOTTED, keep=_dotted_kind)
    if any(hint in found.text for hint in _ERROR_HINTS):
        found.scan("error", _ERROR)
    found.scan("ident", _WORDISH, blank=False)
    found.scan("ident", _HASH, blank=False, keep=_hash_kind)


def _scan_numbers_and_phrases(found: _SentenceScan) -> None:
    """Numbers, then the keyword phrases of decisions, TODOs and errors (found with
    `str.find` in the lowered text, not with a pattern)."""
    text = found.text
    for match in _NUMBER.finditer(text):
        found.hit("number", match.start())
    lowered = text.lower()
    if len(lowered) != len(text):  # a few letters (such as "İ") lower to two characters
        lowered = text.translate(_ASCII_LOWER)
    for kind, phrases in _PHRASES.items():
        for at in _find_phrases(lowered, phrases):
            found.hit(kind, at)


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(text[last:start])
        pieces.append(" " * (end - start))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _find_phrases(lowered: str, phrases: Iterable[tuple[str, bool]]) -> Iterable[int]:
    """Offsets of each phrase in `lowered`; an ASCII phrase must not touch other letters."""
    for phrase, whole_word in phrases:
        at = lowered.find(phrase)
        while at != -1:
            end = at + len(phrase)
            if not whole_word or (
                (at == 0 or not lowered[at - 1].isalpha())
                and (end == len(lowered) or not lowered[end].isalpha())
            ):
                yield at
            at = lowered.find(phrase, end)


def _path_kind(text: str) -> str | None:
    """A path when it looks like one: /abs, ./rel, ~/x, a/b/c, dir/file.ext."""
    segments = [part for part in text.split("/") if part]
    rooted = text.startswith(("/", "./", "../", "~/"))
    extension = segments[-1].rpartition(".")[2].lower() if segments and "." in segments[-1] else ""
    if len(segments) >= 2 and (rooted or len(segments) >= 3 or extension in EXTENSIONS):
        return "path"
    return None


def _dotted_kind(text: str) -> str | None:
    """`name.ext` is a file; `package.module.name` or `Class.method` an identifier."""
    head, _, extension = text.rpartition(".")
    if head and extension.lower() in EXTENSIONS:
        return "path"
    parts = text.split(".")
    wordlike = all(len(part) >= 2 and (part[0].isalpha() or part[0] == "_") for part in parts)
    if wordlike and (len(parts) >= 3 or any("_" in part or not part.islower() for part in parts)):
        return "ident"
    return None


def _hash_kind(text: str) -> str | None:
    """A commit or content hash: hex with both digits and letters."""
    return "ident" if not text.isdigit() and not text.isalpha() else None


def error_lines(text: str) -> list[str]:
    """The first and the last line of a tool output that report a failure (a traceback
    names its exception last)."""
    found = [
        line
        for line in map(str.strip, text.splitlines())
        if _ERROR_LINE.search(line) and not line.startswith("Traceback (most recent call")
    ]
    return list(dict.fromkeys(found[:1] + found[-1:]))


def has_words(text: str) -> bool:
    """False for a sentence of only emoji, symbols or punctuation."""
    return _WORD.search(text) is not None


def normalized(text: str) -> str:
    """A key for spotting the same sentence twice (case, spacing and end punctuation ignored)."""
    return " ".join(text.lower().split()).rstrip(_TRAILING)
