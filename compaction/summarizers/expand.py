"""The closing "Expand for details about: ..." line: what a summary compressed away.

It always names the source range first (the one pointer expansion cannot do without), then
dropped tool outputs, code blocks, the pointers carried over from condensed sources and the
sources that lost sentences, as many as fit in the token cap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compaction.summarizers.analysis import Analysis
from compaction.summarizers.budget import Estimator, truncate_to_tokens
from compaction.summarizers.markers import EXPAND_PREFIX

if TYPE_CHECKING:
    from compaction.summarizers.base import SummaryRequest

_LISTED = 3  # refs named before "+N more"
_SUMMARY_IDS = 8  # source summary ids named before "+N more"


def expand_items(
    request: SummaryRequest, analysis: Analysis, omitted: list[str] | None = None
) -> list[str]:
    """Everything worth naming, most important first."""
    sources = request.sources
    if not sources:
        return ["nothing (no sources)"]
    many = len(sources) > 1
    if sources[0].kind == "summary":
        kinds = "summaries" if many else "summary"
    else:
        kinds = "messages" if many else "message"
    span = sources[0].ref if len(sources) == 1 else f"{sources[0].ref}..{sources[-1].ref}"
    if sources[0].kind == "summary":  # ids are not a range: name them
        refs = [item.ref for item in sources]
        shown = ", ".join(refs[:_SUMMARY_IDS])
        more = f" +{len(refs) - _SUMMARY_IDS} more" if len(refs) > _SUMMARY_IDS else ""
        items = [span, f"{len(sources)} {kinds} ({shown}{more})"]
    else:
        items = [span, f"{span} in full ({len(sources)} {kinds})"]
    outputs = analysis.tool_outputs
    if outputs:
        tokens = sum(output.tokens for output in outputs)
        noun = "tool output" if len(outputs) == 1 else f"{len(outputs)} tool outputs"
        items.append(f"{noun} ({_refs([o.ref for o in outputs])}; {tokens} tokens)")
    for note in analysis.code[:_LISTED]:
        what = f"{note.block.language} code" if note.block.language else "code block"
        names = ": " + " ".join(note.block.names) if note.block.names else ""
        items.append(f"{what} in {note.ref} ({note.block.lines} lines{names})")
    if len(analysis.code) > _LISTED:
        items.append(f"{len(analysis.code) - _LISTED} more code blocks")
    items.extend(dict.fromkeys(analysis.carried_expand_items))
    if omitted:
        items.append(f"details left out of {_refs(omitted)}")
    return items


def expand_line(items: list[str], max_tokens: int, estimator: Estimator) -> str:
    """The line with as many items as fit in `max_tokens`.

    `items[0]` is the bare source span, used alone only when nothing else fits;
    `items[1]` (the span in full) is the first real item.
    """
    line = f"{EXPAND_PREFIX} {items[0]}"
    if len(items) > 1 and estimator(f"{EXPAND_PREFIX} {items[1]}.") <= max_tokens:
        line = f"{EXPAND_PREFIX} {items[1]}"
    for item in items[2:]:
        candidate = f"{line}, {item}"
        if estimator(candidate + ".") <= max_tokens:
            line = candidate
    return truncate_to_tokens(line + ".", max_tokens, estimator)


def _refs(refs: list[str]) -> str:
    shown = ", ".join(refs[:_LISTED])
    return shown if len(refs) <= _LISTED else f"{shown} +{len(refs) - _LISTED} more"
