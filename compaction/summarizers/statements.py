"""What happened in a span, as statements: who asked what, which file changed how, which
error was fixed by what or is still open, which option was chosen and why, what is pending,
where the work stands.

    from compaction.summarizers.statements import draw_statements
    for statement in draw_statements(sources):
        statement.kind, statement.text, statement.refs, statement.features.score

Extractive and deterministic: every statement is built from the span's own words (a
request trimmed, the sentence the assistant wrote before an edit, an error's first line,
the names an edit changed). Each carries the refs of the messages it comes from (the ids
`lcm_expand` and `lcm_describe` take) and the features it is ranked by, so the summarizer
(compose.py) and the compaction addendum handed to a self-compacting agent can both choose
within their own budgets. Pure: no database, no settings.

| kind | from |
|---|---|
| request | a message the user typed (injected text, command output and resumed summaries are not typed) |
| file | the edits of one file: the names they changed and the purpose the assistant wrote before the first |
| error | a failing tool output, by its key phrase; fixed by the edits and commands between it and the next passing run of the same command or tool, else open |
| decision | an assistant sentence that decides ("instead of", "switch to", "we'll use"), with the reason given in it or in the sentence before |
| task | the open items of the agent's last task list (a request the span ends before the assistant answered is marked as not finished) |
| state | the assistant's last words and the last command's outcome |
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.summarizers.base import SourceItem
from compaction.summarizers.extract import score_sentences
from compaction.summarizers.fidelity import short_file_names
from compaction.summarizers.span import (
    EDIT_TOOLS,
    Call,
    ReadSpan,
    changed_names,
    error_key,
    is_tool_mechanics,
    read_span,
)
from compaction.summarizers.words import CHOICE, PROBLEM, clause, content_words, reason_of

KINDS = ("request", "file", "error", "decision", "task", "state")

_REQUEST_WORDS = 30
_PURPOSE_WORDS = 16
_DECISION_WORDS = 45
_STATE_WORDS = 30
_DONE_STATUS = frozenset({"completed", "complete", "done", "cancelled", "canceled"})


@dataclass(frozen=True)
class Features:
    """What a statement is ranked by. `recency`: where its last ref falls in the span (1.0 the
    newest message); `times`: how often the span came back to it; `user_said`: the user named
    it; `open`: not done or not resolved when the span ends."""

    recency: float
    times: int = 1
    user_said: bool = False
    open: bool = False
    signals: int = 0  # what its words carry: paths, names, errors, numbers, a question

    @property
    def score(self) -> float:
        return round(
            2 * self.recency
            + math.log2(1 + self.times)
            + (1.0 if self.user_said else 0.0)
            + (1.5 if self.open else 0.0)
            + min(3.0, self.signals / 2),
            4,
        )


@dataclass(frozen=True)
class Statement:
    kind: str
    text: str  # the clause, names written exactly (files in their short form)
    refs: tuple[str, ...]  # the messages it comes from, oldest first ("msg:12")
    subject: str  # what it is about: a path, an error's key phrase, a task
    features: Features = field(default_factory=lambda: Features(0.0))

    def sentence(self) -> str:
        """The statement on its own, kind said in words (for use outside a summary's
        sections, such as an addendum)."""
        lead = _LEADS[self.kind]
        return f"{lead}{self.text}" if lead else self.text


_LEADS = {
    "request": "The user asked: ",
    "file": "",
    "error": "Error ",
    "decision": "Decided: ",
    "task": "Open: ",
    "state": "State: ",
}


def draw_statements(sources: Sequence[SourceItem], *, concise: bool = False) -> list[Statement]:
    """The statements of a span of messages, in kind order, each kind by rank (best first).
    `concise`: quotes (requests, the assistant's last words) keep only their sentences that
    carry a path, a name, an error, a number or a question, and a quote with none is left
    out."""
    span = read_span(sources)
    if not span.events:
        return []
    drawn = _Drawing(span, concise)
    found = [
        *drawn.requests(),
        *drawn.files(),
        *drawn.errors(),
        *drawn.decisions(),
        *drawn.tasks(),
        *drawn.state(),
    ]
    order = {kind: n for n, kind in enumerate(KINDS)}
    return sorted(found, key=lambda s: (order[s.kind], -s.features.score, s.refs))


class _Drawing:
    def __init__(self, span: ReadSpan, concise: bool = False) -> None:
        self.span = span
        self.concise = concise
        self.last = max(1, span.size - 1)
        touched = [path for call in span.calls for path in call.files()]
        self.short = short_file_names(list(dict.fromkeys(touched)))
        self.user_text = " ".join(p.text for p in span.prose("user")).lower()

    def recency(self, index: int) -> float:
        return round(index / self.last, 4)

    def said_by_user(self, name: str) -> bool:
        short = name.rstrip("/").rsplit("/", 1)[-1].lower()
        return bool(short) and short in self.user_text

    def requests(self) -> list[Statement]:
        """Each typed request in the user's words; the last one marked when the span ends
        before the assistant answered it."""
        typed = self.span.prose("user")
        found = []
        for n, prose in enumerate(typed):
            text = _trimmed(prose.sentences or [prose.text], _REQUEST_WORDS, self.concise)
            if not content_words(text):
                continue
            unfinished = n == len(typed) - 1 and not self.span.answered(prose)
            quoted = f'"{text}"' + (" (not finished when this span ends)" if unfinished else "")
            first_or_last = n in (0, len(typed) - 1)
            signals = sum(found.score for found in score_sentences([text]))
            features = Features(self.recency(prose.index), 1, True, first_or_last, signals)
            found.append(Statement("request", quoted, (prose.ref,), text, features))
        return found

    def files(self) -> list[Statement]:
        edits: dict[str, list[Call]] = {}
        for call in self.span.calls:
            if call.edits():
                for path in call.files():
                    edits.setdefault(path, []).append(call)
        found = []
        for path, calls in edits.items():
            created = all(c.name in ("write", "write_file", "create_file") for c in calls[:1])
            verb = "created" if created and len(calls) == 1 else "edited"
            if len(calls) > 1:
                verb += f" {len(calls)}×"
            names = changed_names(path, calls)
            text = f"{self.short.get(path, path)} {verb}"
            if names:
                text += " (" + ", ".join(f"`{name}`" for name in names) + ")"
            purpose = self.purpose_of(calls)
            if purpose:
                text += f": {purpose}"
            refs = tuple(dict.fromkeys(c.ref for c in calls))
            features = Features(
                self.recency(calls[-1].index), len(calls), self.said_by_user(path), False
            )
            found.append(Statement("file", text, refs, path, features))
        return found

    def purpose_before(self, call: Call) -> str:
        said = self.span.said_before(call)
        return clause(said, _PURPOSE_WORDS) if said else ""

    def purpose_of(self, calls: list[Call]) -> str:
        return next((p for p in map(self.purpose_before, calls) if p), "")

    def errors(self) -> list[Statement]:
        groups: dict[str, list[Call]] = {}
        for call in self.span.calls:
            if call.failed and not is_tool_mechanics(call.output):
                groups.setdefault(error_key(call.output), []).append(call)
        found = []
        for key, calls in groups.items():
            if not key:
                continue
            last = calls[-1]
            fixed_at = self.span.next_pass(last)
            source = _call_label(last, self.short)
            head = f"`{key}` ({source}" + (f", {len(calls)}×)" if len(calls) > 1 else ")")
            if fixed_at is None:
                outcome = "still open: not seen passing after it"
                refs = tuple(dict.fromkeys(c.ref for c in calls))
            else:
                outcome = "fixed" + self.fix_between(last, fixed_at)
                refs = tuple(dict.fromkeys([*(c.ref for c in calls), fixed_at.ref]))
            features = Features(self.recency(last.index), len(calls), False, fixed_at is None)
            found.append(Statement("error", f"{head}: {outcome}", refs, key, features))
        return found

    def fix_between(self, failed: Call, passed: Call) -> str:
        """ " by <what changed between the failure and the passing run>", or "" when
        nothing did (it passed on a retry)."""
        between = self.span.between(failed, passed)
        actions: list[str] = []
        for call in between:
            if call.edits():
                for path in call.files():
                    names = changed_names(path, [call])[:2]
                    named = f" ({', '.join(f'`{n}`' for n in names)})" if names else ""
                    actions.append(f"editing {self.short.get(path, path)}{named}")
            elif call.command() and not call.failed and call.target() != failed.target():
                actions.append(f"running `{call.program()}`")
        actions = list(dict.fromkeys(actions))[:3]
        first = next((c for c in between if c.name in EDIT_TOOLS or c.command()), None)
        purpose = self.purpose_before(first) if first is not None else ""
        said = ", ".join(actions)
        if said:
            return f" by {said}"
        return f" ({purpose})" if purpose else " on a later run"

    def decisions(self) -> list[Statement]:
        found = []
        for prose in self.span.prose("assistant"):
            units = prose.sentences
            for n, unit in enumerate(units):
                if not CHOICE.search(unit) or len(unit.split()) < 4:
                    continue
                reason = reason_of(units, n)
                problem = units[n - 1] if n and PROBLEM.search(units[n - 1]) else ""
                before = problem or (reason if reason and reason not in unit else "")
                text = clause(f"{before} {unit}" if before else unit, _DECISION_WORDS)
                features = Features(self.recency(prose.index), 2 if reason else 1)
                found.append(Statement("decision", text, (prose.ref,), unit, features))
        return _unique(found)

    def tasks(self) -> list[Statement]:
        found = []
        for task in self.span.task_list():
            status = task.status.lower()
            if status in _DONE_STATUS:
                continue
            text = f"task ({status}): {clause(task.text, 20)}"
            features = Features(self.recency(task.index), 1, False, True)
            found.append(Statement("task", text, (task.ref,), task.text, features))
        return found

    def state(self) -> list[Statement]:
        parts, refs = [], []
        said = next((p for p in reversed(self.span.prose("assistant")) if p.sentences), None)
        last_words = _trimmed(said.sentences, _STATE_WORDS, self.concise) if said else ""
        if last_words:
            parts.append(f"the assistant last said: {last_words}")
            refs.append(said.ref)
        ran = next((c for c in reversed(self.span.calls) if c.command() and c.answered), None)
        if ran is not None and ran.command_kinds():
            outcome = f"failed ({error_key(ran.output)})" if ran.failed else "passed"
            parts.append(f"last command `{ran.program()}` {outcome}")
            refs.append(ran.ref)
        if not parts:
            return []
        newest = max(said.index if last_words else 0, ran.index if ran else 0)
        features = Features(self.recency(newest), 1, False, True)
        refs_sorted = tuple(sorted(dict.fromkeys(refs), key=_ref_order))
        return [Statement("state", "; ".join(parts), refs_sorted, "state", features)]


def _trimmed(units: list[str], max_words: int, concise: bool = False) -> str:
    """The most telling of `units` (sentences) within `max_words`, in their order: all of
    them when they fit, else the first (where a request usually says what it wants) and
    then those that carry a path, a name, an error, a number or a question
    (extract.score_sentences), joined by an ellipsis where one was left out. `concise`: only
    those that carry something, "" when none does."""
    scores = [found.score for found in score_sentences(units)] if units else []
    if concise:
        units = [unit for unit, score in zip(units, scores, strict=True) if score > 0]
        scores = [score for score in scores if score > 0]
    if sum(len(unit.split()) for unit in units) <= max_words:
        return clause(" ".join(units), max_words)
    ranked = sorted(range(len(units)), key=lambda n: (n != 0, -scores[n], n))
    chosen, used = [], 0
    for n in ranked:
        words = len(units[n].split())
        if used + words <= max_words or not chosen:
            chosen.append(n)
            used += words
    pieces, last = [], None
    for n in sorted(chosen):
        if last is not None and n != last + 1:
            pieces.append("…")
        pieces.append(units[n])
        last = n
    return clause(" ".join(pieces), max_words)


def _call_label(call: Call, short: dict[str, str]) -> str:
    program = call.program()
    if program:
        return f"`{program}`"
    files = call.files()
    return f"{call.tool} {short.get(files[0], files[0])}" if files else call.tool


def _unique(found: list[Statement]) -> list[Statement]:
    seen: set[str] = set()
    kept = []
    for statement in found:
        key = " ".join(content_words(statement.text))
        if key and key not in seen:
            seen.add(key)
            kept.append(statement)
    return kept


def _ref_order(ref: str) -> tuple[int, str]:
    head, _, tail = ref.partition(":")
    return (int(tail), head) if tail.isdigit() else (0, ref)
