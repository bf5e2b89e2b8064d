"""Deterministic composition: an account of what happened, the handles it does not name,
and quoted sentences, packed into a token budget.

Layout (each part only if it fits):

    Covers 40 messages msg:1..msg:40 (18 user, 20 assistant, 2 tool), 2026-02-17T07:37:00Z to ...
    Asked:
    - "Make the cache expire after 300 seconds" (msg:1)
    Changed:
    - store.py edited 2× (`evict`, `ttl`): make entries expire (msg:5, msg:9)
    Errors and outcomes:
    - `KeyError: 'ttl'` (`python -m pytest`): fixed by editing store.py (`ttl`) (msg:7, msg:11)
    Open:
    - task (in_progress): add the eviction test (msg:12)
    State: the assistant last said: ...; last command `python -m pytest` passed (msg:12)
    Files: src/app.py, core/config.py
    Identifiers: parse_config, MAX_RETRIES
    Excerpts:
    - [07:41 assistant msg:5] We decided to use Postgres instead of SQLite.
    Expand for details about: msg:1..msg:40 in full (40 messages), 2 tool outputs (...).

The budget is kept by charging every part its own estimate including its separator; with
the default estimator (a ceiling over character classes) the sum of the parts bounds the
whole, and a final check truncates if a custom estimator disagrees.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from compaction.summarizers.account import pick, statements_for
from compaction.summarizers.analysis import Group, analyze, time_span
from compaction.summarizers.base import Handles
from compaction.summarizers.budget import Estimator, truncate_to_tokens
from compaction.summarizers.expand import expand_items, expand_line
from compaction.summarizers.extract import FACT_LABELS
from compaction.summarizers.fidelity import measure, missing
from compaction.summarizers.handle_lines import handle_lines_cost, pick_handles, render_handles
from compaction.summarizers.handles import count, draw_handles
from compaction.summarizers.markers import HEADER_PREFIX
from compaction.summarizers.render import format_time, source_end
from compaction.summarizers.sections import EXCERPTS, render_sections

if TYPE_CHECKING:
    from compaction.summarizers.base import SourceItem, SummaryRequest
    from compaction.summarizers.statements import Statement

_OTHER_FACTS_SHARE = 0.1  # of the body budget: tool names and stored-file references
_STATEMENT_SHARE = 0.5  # of a leaf's body budget at least, when the handles do not all fit
# A condensed summary's statements are its children's again; the handles its children
# carried up need more of its room.
_CONDENSED_STATEMENT_SHARE = 0.4
_EXPAND_SHARE = 0.2  # of the whole target
_MIN_EXPAND = 12
_MAX_EXPAND = 120
_HANDLE_FLOOR = 0.9  # of the handles the account may not push out of the summary
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
    handles = request.handles if request.handles is not None else draw_handles(request.sources)
    handles = _previous_last(handles, request.previous_context, drop=signal_only)
    others = _pick_facts(_not_handles(analysis.facts), int(budget * _OTHER_FACTS_SHARE), estimator)
    budget -= _cost(others, estimator)
    body = _Body(analysis.groups, handles, _facts_as_handles(analysis.facts), estimator)
    body.statements = statements_for(request, concise=signal_only)
    share = _STATEMENT_SHARE if request.depth == 0 else _CONDENSED_STATEMENT_SHARE
    body.fill(header, budget, share, signal_only=signal_only, single_day=_single_day(request))
    closing = expand_line(expand_items(request, analysis, body.omitted), expand_cap, estimator)
    facts = [*_fact_lines(others), *render_handles(body.block)]
    excerpts = [f"{EXCERPTS}:", *body.bullets] if body.bullets else []
    account = render_sections(body.chosen)
    lines = [line for line in (header, *account, *facts, *excerpts) if line]
    text = "\n".join([*lines, closing])
    if estimator(text) > target:  # only with an estimator that is not subadditive
        kept = truncate_to_tokens("\n".join(lines), target - estimator(closing) - 1, estimator)
        text = truncate_to_tokens(f"{kept}\n{closing}" if kept else closing, target, estimator)
    return text


class _Body:
    """The account, handle lines and excerpts in one budget. The account (statements as
    sections, account.py) first, in at most the room the handles leave (at least
    `_STATEMENT_SHARE` of it); then the handles it does not already name, ranked
    (handle_lines); then any room left goes to more statements, then to quoted sentences."""

    def __init__(self, groups, handles: Handles, extras: Handles, estimator: Estimator) -> None:
        self.groups, self.handles, self.extras, self.estimator = groups, handles, extras, estimator
        self.statements: list[Statement] = []
        self.chosen: list[Statement] = []
        self.bullets: list[str] = []
        self.omitted: list[str] = []
        self.block: dict[str, list[str]] = {}

    def fill(
        self, header: str, budget: int, share: float, *, signal_only: bool, single_day: bool
    ) -> None:
        every = pick_handles(self.handles, budget, self.estimator, self.extras)
        room = budget - handle_lines_cost(every, self.estimator)
        options = {"signal_only": signal_only, "single_day": single_day}
        wanted = _HANDLE_FLOOR * count(self.handles)
        for tried in (share, share * 0.7, share * 0.5):  # less account while handles fall short
            first = max(int(budget * tried), room)
            best = self._with_account(header, first, budget, options)
            if best[1] >= wanted or first == room:
                break
        spare = budget - best[0]
        if spare > 0:  # the handles needed less than they were left: more statements
            wider = self._with_account(header, first + spare, budget, options)
            if wider[1] >= best[1] and wider[0] <= budget:
                best = wider
        _, _, self.chosen, self.bullets, self.omitted, self.block = best

    def _block(self, said, room: int) -> dict[str, list[str]]:
        """The handles `said` leaves unnamed that fit `room`, ranked."""
        left = missing(self.handles, said)
        return pick_handles(left, room, self.estimator, self.extras, among=self.handles)

    def _with_account(self, header: str, account_budget: int, budget: int, options: dict):
        """(tokens used, handles named, statements, excerpt bullets, omitted refs, handle
        block): statements within `account_budget`, the handles they leave, then quoted
        sentences in what is left."""
        estimator = self.estimator
        chosen = pick(self.statements, account_budget, estimator)
        account = render_sections(chosen)
        used = sum(estimator(line + "\n") for line in account)
        said = measure("\n".join([header, *account]), self.handles)
        block = self._block(said, budget - used)
        room = budget - used - handle_lines_cost(block, estimator) - estimator(EXCERPTS + ":\n")
        bullets, omitted = _pick_sentences(self.groups, room, estimator=estimator, **options)
        bullets = bullets if room > 0 else []
        if bullets:  # what the excerpts name need not be listed again
            used += estimator(EXCERPTS + ":\n") + sum(estimator(line + "\n") for line in bullets)
            said = measure("\n".join([header, *account, *bullets]), self.handles)
            block = self._block(said, budget - used)
        used += handle_lines_cost(block, estimator)
        left = missing(self.handles, said)
        named = said.named + sum(len(names) for kind, names in block.items() if kind in left)
        return used, named, chosen, bullets, omitted, block


def _previous_last(handles: Handles, previous: str | None, *, drop: bool) -> Handles:
    """Handles the previous summary already names rank after the others (the model reads
    that summary too); at the aggressive level they are left out."""
    if not previous:
        return handles
    said = measure(previous, handles)
    if not said.named:
        return handles
    known = {kind: set(handles[kind]) - set(said.dropped.get(kind, ())) for kind in handles}
    ordered: Handles = {}
    for kind, names in handles.items():
        fresh = {name: times for name, times in names.items() if name not in known[kind]}
        again = {name: 0 for name in names if name in known[kind]}  # 0: ranked last
        ordered[kind] = fresh if drop else {**again, **fresh}
    return ordered


def _not_handles(facts: dict[str, Counter[str]]) -> dict[str, Counter[str]]:
    """The key facts that are not handle kinds: tool names and stored-file references."""
    return {kind: counter for kind, counter in facts.items() if kind in ("fileref", "tool")}


def _facts_as_handles(facts: dict[str, Counter[str]]) -> Handles:
    """Paths, identifiers, URLs and errors found in the kept sentences (any speaker), listed
    after the handles when there is room."""
    kinds = {"path": "file", "ident": "ident", "url": "url", "error": "error"}
    tools = set(facts.get("tool", ()))
    extras: Handles = {}
    for kind, handle_kind in kinds.items():
        for name, times in facts.get(kind, Counter()).items():
            if name not in tools:
                extras.setdefault(handle_kind, {})[name] = times
    return extras


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
    if "ident" in ranked:
        ranked["ident"] = [name for name in ranked["ident"] if name not in tools]
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
