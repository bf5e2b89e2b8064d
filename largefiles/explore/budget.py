"""Keeping a summary inside its token budget (measured with `estimate_tokens`)."""

from __future__ import annotations

from core.token_estimate import estimate_tokens

MAX_TOKENS = 500  # the hard ceiling of every exploration summary
FILL_TOKENS = 470  # what explorers aim to stay under, leaving room for a closing line
MIN_TOKENS = 200  # a summary of a large file says at least this much
_EXCERPT_TARGET = 300  # a sparse summary is topped up with an excerpt to about this size


def plural(count: int, word: str) -> str:
    """`1 line`, `2,000 lines`."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def format_number(value: float) -> str:
    """`1,234` for a whole number, `0.25` otherwise."""
    return f"{int(value):,}" if value.is_integer() and abs(value) < 1e15 else f"{value:g}"


def clip(text: str, max_chars: int) -> str:
    """One line: whitespace collapsed, cut to `max_chars` with `…`."""
    line = " ".join(text[: max_chars * 8 + 64].split())  # a bounded slice: text may be huge
    return line if len(line) <= max_chars else line[: max_chars - 1].rstrip() + "…"


def clip_to_tokens(text: str, max_tokens: int, *, from_end: bool = False) -> str:
    """The longest prefix (or suffix) of `text` within `max_tokens`, marked with `…` if cut."""
    if estimate_tokens(text) <= max_tokens:
        return text
    # A character is at least a quarter token, so no more than this many can be kept.
    keep = max(0, max_tokens) * 4
    text = text[-keep:] if from_end and keep else text[:keep]
    low, high = 0, len(text)  # binary search on the number of characters kept
    while low < high:
        mid = (low + high + 1) // 2
        part = text[len(text) - mid :] if from_end else text[:mid]
        if estimate_tokens(part) + 1 <= max_tokens:
            low = mid
        else:
            high = mid - 1
    return "…" + text[len(text) - low :] if from_end else text[:low] + "…"


def join_limited(items: list[str], max_chars: int, *, separator: str = ", ") -> str:
    """`a, b, c` cut before `max_chars`, ending with `… (+N more)` when items were left out."""
    shown: list[str] = []
    used = 0
    for index, item in enumerate(items):
        extra = len(item) + (len(separator) if shown else 0)
        rest = len(items) - index
        if used + extra > max_chars - (len(f" … (+{rest} more)") if rest > 1 else 0):
            return separator.join(shown) + f" … (+{rest} more)" if shown else f"(+{rest} items)"
        shown.append(item)
        used += extra
    return separator.join(shown)


class Outline:
    """Lines added in priority order while they fit under a token ceiling."""

    def __init__(self, max_tokens: int = FILL_TOKENS) -> None:
        self.max_tokens = max_tokens
        self.lines: list[str] = []
        self._tokens = 0

    @property
    def tokens(self) -> int:
        return self._tokens

    def add(self, line: str, *, limit: int | None = None) -> bool:
        """Add `line` if the outline stays within `limit` (default: the ceiling)."""
        ceiling = min(limit, self.max_tokens) if limit is not None else self.max_tokens
        candidate = estimate_tokens("\n".join([*self.lines, line]))
        if candidate > ceiling:
            return False
        self.lines.append(line)
        self._tokens = candidate
        return True

    def add_all(self, lines: list[str], *, limit: int | None = None) -> int:
        """Add lines until one does not fit; how many were added."""
        for index, line in enumerate(lines):
            if not self.add(line, limit=limit):
                return index
        return len(lines)

    def text(self) -> str:
        return "\n".join(self.lines)


def with_excerpt(summary: str, content: str) -> str:
    """`summary`, topped up with the content's beginning when it says little about a large file.

    Some files have little structure to report (minified code, one long JSON string, a schema
    with two tables); the first lines then tell a reader more than the outline alone.
    """
    have = estimate_tokens(summary)
    if have >= MIN_TOKENS or estimate_tokens(content[:20_000]) < 2 * MIN_TOKENS:
        return summary
    excerpt = clip_to_tokens(content[:4000].strip(), _EXCERPT_TARGET - have - 5)
    return f"{summary}\nExcerpt (beginning):\n{excerpt}"
