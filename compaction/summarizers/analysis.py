"""Request-level analysis: the candidate sentences of each source, the facts across all
sources, and what will not survive (tool outputs, code blocks, earlier "expand" pointers).

A leaf (messages) keeps prose sentences, drops tool-output bodies (except their error
lines) and code bodies. A condensed summary reads the source summaries line by line, skips
their header, key-fact and "Expand for details about:" lines (facts are re-extracted and
the expand items are merged), and de-duplicates sentences across them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from compaction.summarizers.budget import Estimator
from compaction.summarizers.extract import (
    FACT_LABELS,
    CodeBlock,
    error_lines,
    has_words,
    normalized,
    score_sentences,
    sentences,
    split_code,
)
from compaction.summarizers.handle_lines import LABELS as HANDLE_LABELS
from compaction.summarizers.markers import EXPAND_PREFIX, FALLBACK_MARKER, HEADER_PREFIX
from compaction.summarizers.render import source_end
from compaction.summarizers.sections import EXCERPTS, split_sections

if TYPE_CHECKING:
    from compaction.summarizers.base import SourceItem, SummaryRequest

# Matches that are markup or noise rather than facts worth listing.
_NOT_FACTS = frozenset({"tool_use", "tool_result", "tool_call", "tool_use_id", "Traceback"})
_SKIPPED_LINE_PREFIXES = (
    HEADER_PREFIX,
    FALLBACK_MARKER,
    *(label + ":" for label in FACT_LABELS.values()),
    *(label + ":" for label in HANDLE_LABELS.values()),
)


@dataclass
class Unit:
    text: str
    score: int
    position: int  # order within its source


@dataclass
class Group:
    """One source and the sentences that may represent it."""

    source: SourceItem
    units: list[Unit] = field(default_factory=list)


@dataclass
class ToolOutput:
    ref: str
    tokens: int


@dataclass
class CodeNote:
    ref: str
    block: CodeBlock


@dataclass
class Analysis:
    groups: list[Group]
    facts: dict[str, Counter[str]]  # kind -> entity -> occurrences (insertion = first seen)
    tool_outputs: list[ToolOutput]
    code: list[CodeNote]
    carried_expand_items: list[str]  # from the sources' own expand lines (condensed only)


def analyze(request: SummaryRequest, estimator: Estimator) -> Analysis:
    facts: dict[str, Counter[str]] = {kind: Counter() for kind in FACT_LABELS}
    analysis = Analysis([], facts, [], [], [])
    seen: set[str] = set()
    repeated = _sentence_keys(request.previous_context or "")
    per_source = [_candidate_texts(item, analysis, estimator) for item in request.sources]
    scored = iter(score_sentences([text for texts in per_source for text in texts]))
    for item, texts in zip(request.sources, per_source, strict=True):
        group = Group(item)
        analysis.groups.append(group)
        for position, text in enumerate(texts):
            found = next(scored)
            _tally(facts, found.entities)
            key = normalized(text)
            if key in seen or (found.score == 0 and not has_words(text)):
                continue
            seen.add(key)
            score = -1 if key in repeated else found.score
            group.units.append(Unit(text, score, position))
    return analysis


def _candidate_texts(item: SourceItem, analysis: Analysis, estimator: Estimator) -> list[str]:
    if item.kind == "summary":
        return _summary_sentences(item.content, analysis)
    if item.role == "tool":
        analysis.tool_outputs.append(ToolOutput(item.ref, estimator(item.content)))
        return error_lines(item.content)
    # tool calls are said by the account and the handle lines, not quoted
    text = "\n".join(line for line in item.content.splitlines() if not line.startswith("[tool "))
    prose, blocks = split_code(text)
    analysis.code.extend(CodeNote(item.ref, block) for block in blocks if block.lines >= 4)
    return sentences(prose)


def _summary_sentences(content: str, analysis: Analysis) -> list[str]:
    """A child summary's lines to quote again: its excerpts and any prose outside its
    account (the account's statements are read back as statements, account.py)."""
    kept, skipped = [], []
    sections, other = split_sections(content)
    excerpts = [f"- {line}" for s in sections if s.heading == EXCERPTS for line in s.lines]
    for line in [*other, *excerpts]:
        stripped = line.strip()
        if stripped.startswith(EXPAND_PREFIX):
            analysis.carried_expand_items.extend(split_items(stripped[len(EXPAND_PREFIX) :]))
        elif stripped.startswith(_SKIPPED_LINE_PREFIXES):
            skipped.append(stripped)
        elif stripped:
            kept.append(_strip_label(stripped))
    for found in score_sentences(skipped) if skipped else ():
        _tally(analysis.facts, found.entities)  # key-fact lines: their facts still count
    return sentences("\n".join(kept))


def _tally(facts: dict[str, Counter[str]], entities: list[tuple[str, str]]) -> None:
    for kind, entity in entities:
        if entity not in _NOT_FACTS:
            facts[kind][entity] += 1


def _strip_label(line: str) -> str:
    """Drop a bullet's "- [07:41 user msg:5]" label; the new summary writes its own."""
    line = line.lstrip("-*• ")
    if line.startswith("[") and "]" in line[:100]:
        return line[line.index("]") + 1 :].lstrip()
    return line


def split_items(text: str) -> list[str]:
    """Split "a, b (c, d), e." on commas outside parentheses."""
    items, depth, start = [], 0, 0
    text = text.strip().rstrip(".")
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            items.append(text[start:index].strip())
            start = index + 1
    items.append(text[start:].strip())
    return [item for item in items if item]


def _sentence_keys(text: str) -> set[str]:
    return {normalized(sentence) for sentence in sentences(text)} - {""}


def time_span(request: SummaryRequest) -> tuple[datetime, datetime]:
    """(earliest, latest) over all sources."""
    starts = [item.created_at for item in request.sources]
    ends = [source_end(item) for item in request.sources]
    return min(starts), max(ends)
