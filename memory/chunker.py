"""Semantic chunking (SRD 9.1): cut source texts into 200-800-token chunks at meaningful
boundaries, type them, summarise them extractively, and keep their offsets.

A source is a list of `Segment`s (one per message, in order). Each segment's text is cut
into blocks: a fenced code block is one block (split further at top-level function and
class lines when too big), a markdown heading starts a new block, and blank lines
separate paragraphs. Blocks are then merged in order into chunks until the next one would
pass the maximum, a heading arrives once the chunk has its minimum, the topic shifts
(adjacent blocks embed far apart), or a tool result starts (tool results stand alone).
A block bigger than the maximum is split by lines/sentences with an optional overlap.

Offsets are character offsets into the source text: the segments joined by "\\n\\n".
Pure functions: no database, no model (the topic-shift test takes an `embed` callable).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from core.token_estimate import estimate
from memory.models import ChunkType

SEPARATOR = "\n\n"
SUMMARY_MAX_WORDS = 40

_FENCE = re.compile(r"^(```|~~~)")
_CODE_FENCE_BLOCK = re.compile(r"(```|~~~).*?(\1|\Z)", re.DOTALL)
_HEADING = re.compile(r"^#{1,6}\s+\S")
_CODE_DEF = re.compile(
    r"^(def |async def |class |function |export |func |fn |pub fn |impl |public |private |"
    r"interface |struct |@)"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_DECISION = re.compile(
    r"\b(we (?:decided|agreed|will go with|chose)|decided to|decision:|let'?s go with|"
    r"agreed to|going forward,? we|we'll use|settled on)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]+")
_STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "this",
        "that",
        "these",
        "those",
        "i",
        "you",
        "we",
        "they",
        "he",
        "she",
        "my",
        "your",
        "our",
        "their",
        "as",
        "by",
        "from",
        "not",
        "no",
        "so",
        "if",
        "then",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "will",
        "would",
        "can",
        "could",
        "should",
        "just",
        "about",
        "into",
        "over",
        "also",
    ]
)


@dataclass(frozen=True)
class Segment:
    text: str
    role: str  # "user" | "assistant" | "tool" | "system"
    seq: int  # the conversation message seq it came from
    is_tool_result: bool = False


@dataclass(frozen=True)
class ChunkSpec:
    rendered_text: str
    summary: str
    chunk_type: str
    token_est: int
    start_offset: int
    end_offset: int
    seq_start: int
    seq_end: int
    content_hash: str
    # False for a unit searched by its words only (no vector): the middle of a long tool
    # result (memory.tool_output_policy).
    embedded: bool = True


@dataclass
class _Block:
    text: str
    start: int  # offset in the source text
    seq: int
    role: str
    is_tool_result: bool = False
    is_code: bool = False
    is_heading: bool = False
    tokens: int = 0
    pieces: list[_Block] = field(default_factory=list)


@dataclass(frozen=True)
class ChunkingOptions:
    min_tokens: int = 200
    max_tokens: int = 800
    overlap_tokens: int = 50
    topic_shift: float = 0.30
    # cut a sentence or line longer than max_tokens at spaces (search units) instead of
    # keeping only its first max_tokens (chunks: such lines are rare at 800 tokens)
    split_words: bool = False
    # search units: a piece is closed once it holds this many tokens, so sentences of that
    # size or more stand alone and only shorter fragments join the next one (0: merge up
    # to max_tokens, as chunks do)
    close_at: int = 0


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_segments(
    segments: Sequence[Segment],
    *,
    options: ChunkingOptions = ChunkingOptions(),
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> list[ChunkSpec]:
    blocks: list[_Block] = []
    offset = 0
    for segment in segments:
        if segment.text.strip():
            blocks.extend(_split_segment(segment, offset, options))
        offset += len(segment.text) + len(SEPARATOR)
    if not blocks:
        return []
    shifts = _topic_shifts(blocks, embed, options.topic_shift)
    groups: list[list[_Block]] = []
    current: list[_Block] = []
    current_tokens = 0
    for index, block in enumerate(blocks):
        starts_new = bool(current) and (
            block.is_tool_result
            or current[-1].is_tool_result
            or current_tokens + block.tokens > options.max_tokens
            or bool(options.close_at and current_tokens >= options.close_at)
            or (block.is_heading and current_tokens >= options.min_tokens)
            or shifts[index]
        )
        if starts_new:
            groups.append(current)
            current, current_tokens = [], 0
        current.append(block)
        current_tokens += block.tokens
    if current:
        groups.append(current)
    return [_spec(group) for group in groups]


def _split_segment(segment: Segment, base: int, options: ChunkingOptions) -> list[_Block]:
    """Blocks of one segment: code fences, headed sections' paragraphs, plain paragraphs;
    each at most max_tokens."""
    text = segment.text
    if segment.is_tool_result:
        whole = _Block(text, base, segment.seq, segment.role, is_tool_result=True)
        return _fit(whole, options)
    blocks: list[_Block] = []
    for start, body, is_code in _paragraphs(text):
        block = _Block(
            body.rstrip("\n"),
            base + start,
            segment.seq,
            segment.role,
            is_code=is_code,
            is_heading=bool(_HEADING.match(body)) and not is_code,
        )
        blocks.extend(_fit(block, options))
    return blocks


def _paragraphs(text: str) -> list[tuple[int, str, bool]]:
    """(offset, text, is code) of each paragraph of `text` that is not blank: a code fence
    whole, a heading with the lines under it, or a run of lines up to a blank one."""
    found: list[tuple[int, str, bool]] = []
    position = 0
    paragraph: list[str] = []
    paragraph_start = 0
    in_code = False

    def flush(is_code: bool = False) -> None:
        nonlocal paragraph
        body = "".join(paragraph)
        if body.strip():
            found.append((paragraph_start, body, is_code))
        paragraph = []

    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if in_code:
            paragraph.append(line)
            if _FENCE.match(stripped):
                flush(is_code=True)
                in_code = False
                paragraph_start = position + len(line)
        elif _FENCE.match(stripped):
            flush()
            paragraph_start = position
            paragraph.append(line)
            in_code = True
        elif _HEADING.match(stripped):
            flush()
            paragraph_start = position
            paragraph.append(line)
        elif not stripped:
            if paragraph and not _HEADING.match("".join(paragraph)):
                flush()
            elif paragraph:
                paragraph.append(line)
            if not paragraph:
                paragraph_start = position + len(line)
        else:
            if not paragraph:
                paragraph_start = position
            paragraph.append(line)
        position += len(line)
    flush(is_code=in_code)
    return found


def _fit(block: _Block, options: ChunkingOptions) -> list[_Block]:
    """The block itself, or pieces of at most max_tokens: code at top-level definitions,
    then lines; prose at sentences; each piece starting with `overlap` tokens of the last."""
    block.tokens = estimate(block.text)
    if block.tokens <= options.max_tokens:
        return [block]
    units = _units(block)
    if options.split_words:
        units = _split_words(units, options.max_tokens)
    pieces: list[_Block] = []
    start = 0
    while start < len(units):
        end, tokens = start, 0
        while end < len(units):
            unit_tokens = estimate(units[end][1])
            if tokens and (
                tokens + unit_tokens > options.max_tokens
                or (options.close_at and tokens >= options.close_at)
            ):
                break
            tokens += unit_tokens
            end += 1
        first, last = units[start], units[end - 1]
        text = block.text[first[0] : last[0] + len(last[1])]
        if estimate(text) > options.max_tokens:  # one huge line: cut by characters
            text = text[: options.max_tokens * 4]
        pieces.append(
            _Block(
                text,
                block.start + first[0],
                block.seq,
                block.role,
                is_tool_result=block.is_tool_result,
                is_code=block.is_code,
                is_heading=block.is_heading and not pieces,
                tokens=estimate(text),
            )
        )
        if end >= len(units):
            break
        back, overlap = end, 0
        while options.overlap_tokens and back - 1 > start and overlap < options.overlap_tokens:
            back -= 1
            overlap += estimate(units[back][1])
        start = back if back > start and overlap <= options.max_tokens // 2 else end
    return pieces


def _units(block: _Block) -> list[tuple[int, str]]:
    """(offset within block, text) units to pack: lines for code and tool output,
    sentences for prose; code prefers to break at top-level definitions."""
    text = block.text
    if block.is_code or block.is_tool_result or "\n" in text.strip():
        units, position = [], 0
        for line in text.splitlines(keepends=True):
            units.append((position, line))
            position += len(line)
        if block.is_code:
            return _group_code(units)
        return units
    units, position = [], 0
    for sentence in _SENTENCE.split(text):
        found = text.find(sentence, position)
        units.append((found, sentence))
        position = found + len(sentence)
    return units


def _split_words(units: list[tuple[int, str]], max_tokens: int) -> list[tuple[int, str]]:
    """Units longer than `max_tokens` cut between words into pieces of at most that size
    (a word longer than that is cut by characters)."""
    out: list[tuple[int, str]] = []
    for offset, text in units:
        if estimate(text) <= max_tokens:
            out.append((offset, text))
            continue
        start = end = None
        for word in _NON_SPACE.finditer(text):
            if start is None:
                start = word.start()
            elif estimate(text[start : word.end()]) > max_tokens:
                out.append((offset + start, text[start:end]))
                start = word.start()
            end = word.end()
            while estimate(text[start:end]) > max_tokens:  # one huge word
                cut = start + max_tokens * 4
                out.append((offset + start, text[start:cut]))
                start = cut
        if start is not None and start < (end or 0):
            out.append((offset + start, text[start:end]))
    return out


_NON_SPACE = re.compile(r"\S+")


def _group_code(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Lines grouped into top-level definitions (a new group at each unindented def/class)."""
    groups: list[tuple[int, str]] = []
    for offset, line in lines:
        if groups and not _CODE_DEF.match(line):
            start, text = groups[-1]
            groups[-1] = (start, text + line)
        else:
            groups.append((offset, line))
    return groups


def _topic_shifts(
    blocks: list[_Block], embed: Callable[[list[str]], np.ndarray] | None, threshold: float
) -> list[bool]:
    """shifts[i]: block i reads as a new topic after block i-1 (never across a code/prose
    change of the same message, which usually explains the code)."""
    shifts = [False] * len(blocks)
    if embed is None or len(blocks) < 2:
        return shifts
    vectors = embed([b.text for b in blocks])
    for i in range(1, len(blocks)):
        if blocks[i].seq == blocks[i - 1].seq and blocks[i].is_code != blocks[i - 1].is_code:
            continue
        if float(vectors[i] @ vectors[i - 1]) < threshold:
            shifts[i] = True
    return shifts


def _spec(group: list[_Block]) -> ChunkSpec:
    first, last = group[0], group[-1]
    # Blocks of one chunk keep their own text (joined as in the source: by a blank line).
    text = SEPARATOR.join(block.text for block in group)
    return ChunkSpec(
        rendered_text=text,
        summary=extractive_summary(text),
        chunk_type=classify(group),
        token_est=estimate(text),
        start_offset=first.start,
        end_offset=last.start + len(last.text),
        seq_start=min(b.seq for b in group),
        seq_end=max(b.seq for b in group),
        content_hash=content_hash(text),
    )


def classify(group: list[_Block]) -> str:
    if any(b.is_tool_result for b in group):
        return ChunkType.TOOL_RESULT
    code_chars = sum(len(b.text) for b in group if b.is_code)
    total = sum(len(b.text) for b in group) or 1
    if code_chars * 2 >= total:
        return ChunkType.CODE
    text = " ".join(b.text for b in group)
    if _DECISION.search(text):
        return ChunkType.DECISION
    roles = {b.role for b in group}
    if roles == {"user"}:
        return ChunkType.USER_CONTEXT
    if "assistant" in roles:
        return ChunkType.EXPLANATION
    return ChunkType.OTHER


def extractive_summary(text: str, max_words: int = SUMMARY_MAX_WORDS) -> str:
    """The heading (if any) and the sentence that best covers the text's frequent words,
    cut at `max_words`: cheap, deterministic, always taken from the text itself."""
    stripped = text.strip()
    if not stripped:
        return ""
    lines = stripped.splitlines()
    heading = lines[0].lstrip("#").strip() if _HEADING.match(lines[0]) else ""
    body = "\n".join(lines[1:]) if heading else stripped
    prose = _CODE_FENCE_BLOCK.sub(" ", body)
    if not prose.strip():  # all code: its first definition line says most
        code_lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
        defs = [ln for ln in code_lines if _CODE_DEF.match(ln)]
        prose = (defs or [ln for ln in code_lines if not _FENCE.match(ln)] or [""])[0]
    body = prose
    sentences = [s.strip() for s in _SENTENCE.split(" ".join(body.split())) if s.strip()]
    words = [w.lower() for w in _WORD.findall(body) if w.lower() not in _STOP]
    best = ""
    if sentences:
        frequency = Counter(words)

        def score(sentence: str) -> float:
            terms = [w.lower() for w in _WORD.findall(sentence) if w.lower() not in _STOP]
            return sum(frequency[t] for t in set(terms)) / (1 + len(terms) ** 0.5)

        best = max(sentences, key=score)
    summary = f"{heading}: {best}" if heading and best else heading or best
    parts = summary.split()
    return " ".join(parts[:max_words]) + (" …" if len(parts) > max_words else "")


# ---------------------------------------------------------------------------------------
# search units (docs/memory.md, "Units")

UNIT_SLACK = 1.5  # a message up to this many times the unit size stays whole
# A longer message is cut at its sentences: one of this share of the unit size or more is a
# unit of its own; shorter fragments ("Thanks!", "Sure.") join the sentence after them.
# Merging sentences up to the unit size put a fact said in passing into one vector with an
# unrelated sentence, and its meaning no longer stood out (issue 47, docs/benchmarks.md).
UNIT_SENTENCE_SHARE = 0.5


def unit_segments(segments: Sequence[Segment], *, unit_tokens: int) -> list[ChunkSpec]:
    """Search units: one per short message, the sentences of a long one (module constants).

    A unit never spans two messages (seq_start == seq_end), so a hit names exactly the
    message it came from and costs only its own tokens; its offsets are character offsets
    into that message's text. Passages are cut at the chunker's own boundaries (code
    blocks, headings, paragraphs, then lines and sentences), without overlap.
    """
    options = ChunkingOptions(
        min_tokens=unit_tokens,
        max_tokens=max(1, int(unit_tokens * UNIT_SLACK)),
        overlap_tokens=0,
        topic_shift=-2.0,  # no topic cuts: passages are small already
        split_words=True,
        close_at=max(1, int(unit_tokens * UNIT_SENTENCE_SHARE)),
    )
    units: list[ChunkSpec] = []
    for segment in segments:
        if not segment.text.strip():
            continue
        if estimate(segment.text) <= options.max_tokens:
            units.extend(chunk_segments([segment], options=ChunkingOptions(1, 10**9, 0, -2.0)))
        else:
            units.extend(chunk_segments([segment], options=options))
    return units
