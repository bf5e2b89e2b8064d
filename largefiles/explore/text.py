"""Text exploration: counts, headings, notable lines, the beginning and the end.

A model-based summarizer may be plugged in: `summarize_text(text, max_tokens) -> str`. When one
is given its answer is used (cut to the budget) after the counts line; when it raises or answers
nothing, the deterministic summary is used instead.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections import Counter
from collections.abc import Callable

from core.token_estimate import estimate_tokens

from .budget import FILL_TOKENS, Outline, clip, clip_to_tokens, plural

SummarizeText = Callable[[str, int], str]

logger = logging.getLogger(__name__)

_EDGE_TOKENS = 110  # the beginning and the end each
_WHOLE_TOKENS = 2 * _EDGE_TOKENS + 20  # a text this small is shown whole
_EDGE_CHARS = 4000  # how much of each end is read before cutting to tokens
# Possessive quantifiers (`{m,n}+`) keep a failed match from backtracking along long lines.
_HEADINGS = (
    re.compile(r"^#{1,6}[ \t]+\S[^\n]{0,150}+$", re.M),  # markdown
    re.compile(r"^[^\n]{1,150}+(?=\n(?:={3,}|-{3,})[ \t]*$)", re.M),  # underlined
    re.compile(r"^\d{1,2}(?:\.\d{1,2}){0,3}\.?[ \t]+[A-Z][^\n.!?]{2,80}+$", re.M),  # 2.1 Title
    re.compile(r"^[A-Z][A-Z0-9 ,:&'()/-]{3,79}+$", re.M),  # ALL CAPS
)
_NOTABLE = re.compile(r"\b(?:ERROR|FATAL|CRITICAL|PANIC|FAILED|Exception|Traceback)\b")
_LEVEL = re.compile(r"\b(TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|FATAL|CRITICAL)\b")


def explore_text(
    content: str, *, summarize_text: SummarizeText | None = None, note: str | None = None
) -> str:
    lines = content.splitlines()
    header = Outline()
    if note:
        header.add(note)
    header.add(
        f"Text: {plural(len(lines), 'line')}, {plural(len(content.split()), 'word')}, "
        f"{plural(len(content), 'character')}."
    )
    if summarize_text is not None:
        written = _model_summary(content, summarize_text, FILL_TOKENS - header.tokens - 2)
        if written:
            return header.text() + "\n" + written
    return _deterministic(content, header)


def _model_summary(content: str, summarize_text: SummarizeText, budget: int) -> str | None:
    try:
        written = summarize_text(content, budget)
    except Exception:  # any failure of the plug-in falls back to the deterministic summary
        logger.warning("text summarizer failed; using the deterministic summary", exc_info=True)
        return None
    if not isinstance(written, str) or not written.strip():
        return None
    return clip_to_tokens(written.strip(), budget)


def _deterministic(content: str, outline: Outline) -> str:
    if estimate_tokens(content) <= _WHOLE_TOKENS:
        outline.add("Content:\n" + _tidy(content))
        return outline.text()
    line_starts = [0] + [m.end() for m in re.finditer("\n", content)]

    def line_of(offset: int) -> int:
        return bisect.bisect_right(line_starts, offset)

    headings = sorted(
        {m.start(): m.group() for p in _HEADINGS for m in p.finditer(content)}.items()
    )
    if headings:
        outline.add(f"Headings ({len(headings):,}):")
        entries = [f"L{line_of(start)}: {clip(text, 100)}" for start, text in headings]
        shown = outline.add_all(entries, limit=170)
        if shown < len(entries):
            outline.add(f"… {len(entries) - shown:,} more headings", limit=180)
    levels = Counter(m.group(1).replace("WARNING", "WARN") for m in _LEVEL.finditer(content))
    if sum(levels.values()) >= 3:
        counts = ", ".join(f"{level} {count:,}" for level, count in levels.most_common())
        outline.add(f"Log levels mentioned: {counts}", limit=200)
    notable: list[str] = []
    seen: set[str] = set()
    position = 0
    while len(notable) < 5 and (match := _NOTABLE.search(content, position)):
        start = content.rfind("\n", 0, match.start()) + 1
        end = content.find("\n", match.end())
        end = len(content) if end == -1 else end
        entry = clip(content[start:end], 120)
        if entry not in seen:
            seen.add(entry)
            notable.append(f"L{line_of(start)}: {entry}")
        position = end
    if notable and outline.add("Notable lines:", limit=240):
        outline.add_all(notable, limit=240)
    beginning = clip_to_tokens(_tidy(content[:_EDGE_CHARS]), _EDGE_TOKENS)
    end = clip_to_tokens(_tidy(content[-_EDGE_CHARS:]), _EDGE_TOKENS, from_end=True)
    outline.add("Beginning:\n" + beginning)
    outline.add("End:\n" + end)
    return outline.text()


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines))
