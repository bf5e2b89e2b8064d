"""Deterministic composition: pack the best sentences and facts into a token budget.

Layout (each part only if it fits):

    Covers 40 messages msg:1..msg:40 (18 user, 20 assistant, 2 tool), 2026-02-17T07:37:00Z to ...
    Files: src/app.py, core/config.py
    Identifiers: parse_config, MAX_RETRIES
    - [07:41 assistant msg:5] We decided to use Postgres instead of SQLite.
    - [07:50 user msg:9] Should the cache expire after 300 seconds?
    Expand for details about: msg:1..msg:40 in full (40 messages), 2 tool outputs (...).

The budget is kept by charging every part its own estimate including its separator; with
the default estimator (a ceiling over character classes) the sum of the parts bounds the
whole, and a final check truncates if a custom estimator disagrees.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from compaction.summarizers.analysis import Group, analyze, time_span
from compaction.summarizers.budget import Estimator, truncate_to_tokens
from compaction.summarizers.expand import expand_items, expand_line
from compaction.summarizers.extract import FACT_LABELS
from compaction.summarizers.markers import HEADER_PREFIX
from compaction.summarizers.render import format_time, source_end

if TYPE_CHECKING:
    from compaction.summarizers.base import SourceItem, SummaryRequest

_FACTS_SHARE = 0.3  # of the body budget, before sentences get the rest
_EXPAND_SHARE = 0.2  # of the whole target
_MIN_EXPAND = 12
_MAX_EXPAND = 120
_MIN_PLAIN = 4  # tokens; a plain sentence shorter than this ("Thanks!", "Sure.") says nothing


def compose(
    request: SummaryRequest, *, target: int, signal_only: bool, estimator: Estimator
) -> str:
    """An extractive summary of `request` within `target` tokens.

    `signal_only` (aggressive and fallback) keeps only sentences that carry a decision,
    question, TODO, error, path, identifier, URL or number; otherwise plain sentences come
    last, after every sentence with a signal.
    """
    if not request.sources:
        return truncate_to_tokens("No source material.", target, estimator)
    analysis = analyze(request, estimator)
    expand_cap = min(_MAX_EXPAND, max(_MIN_EXPAND, int(target * _EXPAND_SHARE)))
    if expand_cap >= target:
        return expand_line(expand_items(request, analysis), target, estimator)
    budget = target - expand_cap - 1
    header = _header(request, budget, estimator)
    budget -= estimator(header + "\n")
    fact_cap = int(budget * _FACTS_SHARE)
    facts = _pick_facts(analysis.facts, fact_cap, estimator)
    bullets, omitted = _pick_sentences(
        analysis.groups,
        budget - _cost(facts, estimator),
        signal_only=signal_only,
        estimator=estimator,
        single_day=_single_day(request),
    )
    leftover = budget - _cost(facts, estimator) - sum(estimator(line + "\n") for line in bullets)
    if leftover > 0:  # sentences did not need it all: give the rest to facts
        more = _pick_facts(analysis.facts, _cost(facts, estimator) + leftover, estimator)
        if _count(more) > _count(facts):
            facts = more
    closing = expand_line(expand_items(request, analysis, omitted), expand_cap, estimator)
    lines = [line for line in (header, *_fact_lines(facts), *bullets) if line]
    text = "\n".join([*lines, closing])
    if estimator(text) > target:  # only with an estimator that is not subadditive
        body = truncate_to_tokens("\n".join(lines), target - estimator(closing) - 1, estimator)
        text = truncate_to_tokens(f"{body}\n{closing}" if body else closing, target, estimator)
    return text


def _header(request: SummaryRequest, room: int, estimator: Estimator) -> str:
    """What the summary covers: the full form when it takes at most a quarter of the room,
    else a compact one (refs and a time range only)."""
    sources = request.sources
    start, end = time_span(request)
    span = sources[0].ref if len(sources) == 1 else f"{sources[0].ref}..{sources[-1].ref}"
    when = f"{format_time(start)} to {format_time(end)}"
    if request.depth == 0:
        roles = Counter(item.role or "unknown" for item in sources)
        mix = ", ".join(f"{count} {role}" for role, count in roles.items())
        full = f"{HEADER_PREFIX}{len(sources)} messages {span} ({mix}), {when}."
    else:
        full = f"{HEADER_PREFIX}{len(sources)} depth-{request.depth - 1} summaries {span}, {when}."
    if estimator(full + "\n") <= room // 4:
        return full
    first, last = format_time(start), format_time(end)
    if first[:10] == last[:10]:
        compact = f"{HEADER_PREFIX}{span}, {first[:10]} {first[11:16]}-{last[11:16]}."
    else:
        compact = (
            f"{HEADER_PREFIX}{span}, {first[:10]} {first[11:16]} to {last[:10]} {last[11:16]}."
        )
    return truncate_to_tokens(compact, room - 1, estimator)


def _pick_facts(
    facts: dict[str, Counter[str]], cap: int, estimator: Estimator
) -> dict[str, list[str]]:
    """Round-robin over fact kinds, most frequent first, while the cap allows."""
    ranked = {kind: [name for name, _ in counter.most_common()] for kind, counter in facts.items()}
    tools = set(ranked.get("tool", ()))
    ranked["ident"] = [name for name in ranked.get("ident", ()) if name not in tools]
    chosen: dict[str, list[str]] = {kind: [] for kind in ranked}
    used = 0
    longest = max((len(names) for names in ranked.values()), default=0)
    for rank in range(min(longest, 64)):
        for kind, names in ranked.items():
            if rank >= len(names):
                continue
            label = estimator(FACT_LABELS[kind] + ": \n") if not chosen[kind] else 0
            cost = label + estimator(names[rank] + ", ")
            if used + cost <= cap:
                chosen[kind].append(names[rank])
                used += cost
    return chosen


def _fact_lines(facts: dict[str, list[str]]) -> list[str]:
    return [f"{FACT_LABELS[kind]}: {', '.join(names)}" for kind, names in facts.items() if names]


def _count(facts: dict[str, list[str]]) -> int:
    return sum(len(names) for names in facts.values())


def _cost(facts: dict[str, list[str]], estimator: Estimator) -> int:
    return sum(estimator(line + "\n") for line in _fact_lines(facts))


def _pick_sentences(
    groups: list[Group], budget: int, *, signal_only: bool, estimator: Estimator, single_day: bool
) -> tuple[list[str], list[str]]:
    """Bullets (one per source, in order) and the refs of sources that lost sentences."""
    unit_cap = max(16, min(90, budget // 4))
    candidates = []
    for index, group in enumerate(groups):
        for unit in group.units:
            if unit.score > 0 or (not signal_only and estimator(unit.text) >= _MIN_PLAIN):
                candidates.append((-unit.score, index, unit.position, unit.text))
    candidates.sort()
    chosen: dict[int, list[tuple[int, str]]] = {}
    labels: dict[int, str] = {}
    used = 0
    for _, index, position, text in candidates:
        if index not in labels:
            labels[index] = f"- [{_label(groups[index].source, single_day)}]"
        if estimator(text) > unit_cap:
            text = truncate_to_tokens(text, unit_cap, estimator)
        cost = estimator(" " + text) + (0 if index in chosen else estimator(labels[index] + "\n"))
        if used + cost <= budget:
            chosen.setdefault(index, []).append((position, text))
            used += cost
    bullets = [
        labels[index] + "".join(" " + text for _, text in sorted(chosen[index]))
        for index in sorted(chosen)
    ]
    omitted = [
        group.source.ref
        for index, group in enumerate(groups)
        if len(chosen.get(index, ())) < len(group.units)
    ]
    return bullets, omitted


def _label(item: SourceItem, single_day: bool) -> str:
    def when(moment) -> str:
        stamp = format_time(moment)  # 2026-02-17T07:37:00Z
        return stamp[11:16] if single_day else stamp[:10] + " " + stamp[11:16]

    if item.kind == "summary":
        return f"{when(item.created_at)}-{when(source_end(item))} {item.ref}"
    return f"{when(item.created_at)} {item.role or 'unknown'} {item.ref}"


def _single_day(request: SummaryRequest) -> bool:
    start, end = time_span(request)
    return format_time(start)[:10] == format_time(end)[:10]
