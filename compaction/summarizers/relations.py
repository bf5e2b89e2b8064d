"""Relation probes: does a text say what happened in a span, not only name what was in it?

    probes = draw_probes(sources)          # deterministic, from the span itself
    found = check(summary_text, probes)    # found.score, found.kept, found.missed

Handles (handles.py) ask whether a summary can still *name* a file or an error. A probe asks
whether it says what happened to it: the file named together with a name its edit changed
or the purpose the assistant gave for it; the error together with what fixed it, or with a
word saying it is still open; the user's request in the user's own words, said to be the
user's; the option chosen together with its reason or the option it replaced; an open task
together with a word saying it is open. Each must hold on one line of the text (a line's
heading, the nearest line above it ending in ":" or starting with "#", counts for the
words that say whose or open), so a list of names on a line per kind scores nothing. The
rules, as `lcm_eval fidelity` prints them, are `RULES`. Pure: no database, no settings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.summarizers.base import SourceItem
from compaction.summarizers.fidelity import short_file_names
from compaction.summarizers.span import (
    Call,
    ReadSpan,
    changed_names,
    error_key,
    error_name,
    is_tool_mechanics,
    read_span,
)
from compaction.summarizers.words import CHOICE, REJECTED, content_words, reason_of

KINDS = ("file", "error", "request", "decision", "pending")
# Most probes of each kind per span: the measure asks about what a continuing agent needs
# most, not about everything.
CAPS = {"file": 4, "error": 4, "request": 4, "decision": 3, "pending": 3}

_ATTRIBUTION = ("user", "asked", "asks", "requested", "request", "requests", "wants", "wanted")
_OPEN = (
    "still open",
    "open:",
    "(open)",
    "remains open",
    "unresolved",
    "not fixed",
    "not yet fixed",
    "still fail",
    "still failing",
    "still broken",
    "ongoing",
    "not seen passing",
    "unfixed",
)
_FIXED = ("fixed", "resolved", "passed", "passes", "passing", "works", "succeeded", "retried")
_PENDING = (
    "pending",
    "in progress",
    "in_progress",
    "todo",
    "to do",
    "open",
    "next",
    "remaining",
    "not yet",
    "unfinished",
    "not finished",
    "left",
)
_FILE_TOKEN = re.compile(r"[\w./~-]*/[\w./~-]*|[\w.-]+\.[a-z0-9]{1,8}\b")
# A line that only lists names ("Files: a.py, b.py"): each item one token.
_LIST_ITEM = re.compile(r"^[^\s,;]+$")
_HEADING = re.compile(r"^\s*(?:#+\s*\S|(?:\d+\.\s*)?[^\s:][^:]{0,60}:\s*$)")
_ROLE = re.compile(r'^<message\b[^>]*\brole="(\w+)"')

RULES = """\
Relation probes (compaction/summarizers/relations.py), drawn from the span, at most
file 4, error 4, request 4, decision 3, pending 3. A probe holds when one line of the text
(or one item of a line joined by "; ") has its anchor and its evidence; words saying whose or open may also be in the line's
heading (the nearest line above ending in ":" or starting with "#").
- file: a file the span edited (most edits first, then the most recent). Anchor: the file
  (full path, last two segments, or its name when no other file of the span has it).
  Evidence: a name its edits changed (in the new text and not the old, or removed), or 2
  words of the sentence the assistant wrote just before its first edit. A file whose edits
  give neither is not probed.
- error: a failing tool output (not tool mechanics such as an edit whose text was not
  found), by its key phrase (open ones first, then the most frequent, then the most
  recent). Anchor: the error's name (TypeError, HTTP 404), else half of the key phrase's
  words. Evidence, fixed (a later run of the same command, or the same tool on the same
  file, passed): a file edited, a name changed or a command run in between, or 2 words of
  the sentence before the first of those; passed with nothing in between: a word such as
  fixed, resolved, passed. Still open: a word such as open, unresolved, not fixed,
  still failing, ongoing, pending.
- request: a message the user typed (the last, the first, then the most recent). Anchor:
  half of its first 12 words of 4+ letters (at least 2; shorter requests are not probed).
  Evidence: a word saying it is the user's (user, asked, requested, wants) in the line or
  its heading.
- decision: an assistant sentence that chooses (instead of, switch to, we'll use, decided,
  ...) and gives a reason in it or in the sentence before (the most recent). Anchor: 40% of
  its words (at least 2). Evidence: 2 words of the reason, or a word of the option after
  "instead of" / "rather than".
- pending: the open items of the agent's last task list (in progress first), and the last
  request when the span ends before the assistant answered it. Anchor: half of its first 10
  words (at least 2). Evidence: a word saying it is open (pending, in progress, todo, next,
  remaining, not yet) in the line or its heading.
A line that only lists names (after a short label, one token between each comma) is not
read: a list of names scores 0."""


@dataclass(frozen=True)
class Terms:
    """At least `need` of `words` (each as a word, ignoring case)."""

    words: tuple[str, ...]
    need: int

    def met(self, line: str) -> bool:
        found = 0
        for word in self.words:
            if _has_word(line, word):
                found += 1
                if found >= self.need:
                    return True
        return False


@dataclass(frozen=True)
class Probe:
    kind: str
    subject: str  # what a miss is reported as
    anchor: tuple[Terms, ...]  # one of them, in the line
    evidence: tuple[Terms, ...]  # one of them, in the line (outside the anchor's words)
    heading_ok: bool  # the evidence may be in the line's heading instead
    refs: tuple[str, ...]

    def ask(self) -> str:
        """What a summary that misses this probe should say (the gate's retry lists it)."""
        return _ASKS[self.kind].format(self.subject)

    def holds(self, line: str, heading: str) -> bool:
        anchored = next((terms for terms in self.anchor if terms.met(line)), None)
        if anchored is None:
            return False
        rest = _without(line, anchored.words)
        if self.kind == "file":  # another file's name is not what this one's edit changed
            rest = _FILE_TOKEN.sub(" ", rest)
        if any(terms.met(rest) for terms in self.evidence):
            return True
        return self.heading_ok and any(terms.met(heading) for terms in self.evidence)


@dataclass
class Relations:
    kept: dict[str, list[int]] = field(default_factory=dict)  # kind -> [held, probes]
    missed: dict[str, list[str]] = field(default_factory=dict)  # kind -> subjects
    unheld: list[Probe] = field(default_factory=list)  # the probes missed, in order

    @property
    def total(self) -> int:
        return sum(total for _, total in self.kept.values())

    @property
    def held(self) -> int:
        return sum(held for held, _ in self.kept.values())

    @property
    def score(self) -> float | None:
        return round(self.held / self.total, 4) if self.total else None

    def as_dict(self) -> dict:
        return {"score": self.score, "kept": self.kept, "missed": self.missed}


def check(text: str, probes: Sequence[Probe]) -> Relations:
    """Which `probes` hold in `text`."""
    lines = _lines(text)
    result = Relations()
    for probe in probes:
        pair = result.kept.setdefault(probe.kind, [0, 0])
        pair[1] += 1
        if any(probe.holds(line, heading) for line, heading in lines):
            pair[0] += 1
        else:
            result.missed.setdefault(probe.kind, []).append(probe.subject)
            result.unheld.append(probe)
    return result


def draw_probes(sources: Sequence[SourceItem]) -> list[Probe]:
    """The probes of a span of messages, in `KINDS` order."""
    span = read_span(sources)
    if not span.events:
        return []
    drawing = _Drawing(span)
    found = [
        *drawing.files(),
        *drawing.errors(),
        *drawing.requests(),
        *drawing.decisions(),
        *drawing.pending(),
    ]
    return found


class _Drawing:
    def __init__(self, span: ReadSpan) -> None:
        self.span = span
        self.paths = list(dict.fromkeys(p for call in span.calls for p in call.files()))
        self.short = short_file_names(self.paths)

    def file_forms(self, path: str) -> tuple[str, ...]:
        segments = [part for part in path.rstrip("/").split("/") if part]
        forms = [path.rstrip("/")]
        if len(segments) >= 2:
            forms.append("/".join(segments[-2:]))
        if segments and self.short.get(path) == segments[-1]:
            forms.append(segments[-1])
        return tuple(dict.fromkeys(forms))

    def purpose_words(self, call: Call, exclude: str = "") -> tuple[str, ...]:
        said = self.span.said_before(call)
        skip = set(content_words(exclude))
        return tuple(w for w in content_words(said, 8) if w not in skip)

    def files(self) -> list[Probe]:
        edits: dict[str, list[Call]] = {}
        for call in self.span.calls:
            if call.edits():
                for path in call.files():
                    edits.setdefault(path, []).append(call)
        ranked = sorted(edits.items(), key=lambda kv: (-len(kv[1]), -kv[1][-1].index))
        found = []
        for path, calls in ranked:
            evidence = []
            names = changed_names(path, calls)
            if names:
                evidence.append(Terms(tuple(names), 1))
            purpose = next((w for w in (self.purpose_words(c, path) for c in calls) if w), ())
            if len(purpose) >= 2:
                evidence.append(Terms(purpose, 2))
            if evidence:
                anchor = (Terms(self.file_forms(path), 1),)
                found.append(Probe("file", path, anchor, tuple(evidence), False, _refs(calls)))
            if len(found) == CAPS["file"]:
                break
        return found

    def errors(self) -> list[Probe]:
        groups: dict[str, list[Call]] = {}
        for call in self.span.calls:
            if call.failed and not is_tool_mechanics(call.output):
                key = error_key(call.output)
                if key:
                    groups.setdefault(key, []).append(call)
        outcomes = {key: self.span.next_pass(calls[-1]) for key, calls in groups.items()}
        ranked = sorted(
            groups.items(),
            key=lambda kv: (outcomes[kv[0]] is not None, -len(kv[1]), -kv[1][-1].index),
        )
        found = []
        for key, calls in ranked[: CAPS["error"]]:
            name = error_name(key)
            words = tuple(content_words(key, 6))
            anchor = (Terms((name,), 1),) if name else (Terms(words, _half(words)),)
            if not name and len(words) < 2:
                continue
            passed = outcomes[key]
            evidence = self.fix_terms(calls[-1], passed) if passed else (Terms(_OPEN, 1),)
            refs = _refs([*calls, *([passed] if passed else [])])
            found.append(Probe("error", key, anchor, evidence, False, refs))
        return found

    def fix_terms(self, failed: Call, passed: Call) -> tuple[Terms, ...]:
        names: list[str] = []
        first = None
        for call in self.span.between(failed, passed):
            if call.edits():
                first = first or call
                for path in call.files():
                    names.extend(self.file_forms(path))
                    names.extend(changed_names(path, [call]))
            elif call.command() and not call.failed and call.target() != failed.target():
                first = first or call
                names.append(call.program())
        if not names:
            return (Terms(_FIXED, 1),)
        terms = [Terms(tuple(dict.fromkeys(names)), 1)]
        purpose = self.purpose_words(first) if first is not None else ()
        if len(purpose) >= 2:
            terms.append(Terms(purpose, 2))
        return tuple(terms)

    def requests(self) -> list[Probe]:
        typed = [p for p in self.span.prose("user") if len(content_words(p.text, 12)) >= 2]
        if not typed:
            return []
        order = [typed[-1], typed[0], *reversed(typed[1:-1])]
        found = []
        for chosen in {id(p): p for p in order}.values():
            words = tuple(content_words(chosen.text, 12))
            subject = " ".join(chosen.text.split()[:14])
            attributed = (Terms(_ATTRIBUTION, 1),)
            anchor = (Terms(words, _half(words)),)
            found.append(Probe("request", subject, anchor, attributed, True, (chosen.ref,)))
            if len(found) == CAPS["request"]:
                break
        return found

    def decisions(self) -> list[Probe]:
        found = []
        for prose in reversed(self.span.prose("assistant")):
            units = prose.sentences
            for n in reversed(range(len(units))):
                unit = units[n]
                reason = reason_of(units, n) if CHOICE.search(unit) else ""
                if not reason:
                    continue
                reason_words = set(content_words(reason))
                words = tuple(w for w in content_words(unit, 10) if w not in reason_words)
                if len(words) < 2:
                    continue
                evidence = [Terms(tuple(content_words(reason, 8)), 2)]
                rejected = REJECTED.search(unit)
                if rejected:
                    evidence.append(Terms(tuple(content_words(rejected.group(1), 4)), 1))
                anchor = (Terms(words, max(2, math.ceil(0.4 * len(words)))),)
                subject = " ".join(unit.split()[:16])
                found.append(
                    Probe("decision", subject, anchor, tuple(evidence), False, (prose.ref,))
                )
                if len(found) == CAPS["decision"]:
                    return found
        return found

    def pending(self) -> list[Probe]:
        tasks = [t for t in self.span.task_list() if t.status.lower() not in _DONE]
        tasks.sort(key=lambda task: task.status.lower() != "in_progress")
        items = [(task.text, task.ref) for task in tasks]
        typed = self.span.prose("user")
        if typed and not self.span.answered(typed[-1]):
            items.append((typed[-1].text, typed[-1].ref))
        found = []
        for text, ref in items:
            words = tuple(content_words(text, 10))
            if len(words) < 2:
                continue
            anchor = (Terms(words, _half(words)),)
            subject = " ".join(text.split()[:14])
            found.append(Probe("pending", subject, anchor, (Terms(_PENDING, 1),), True, (ref,)))
            if len(found) == CAPS["pending"]:
                break
        return found


_ASKS = {
    "file": "file {}: how it changed (the names its edits changed, or what for)",
    "error": "error `{}`: what fixed it, or that it is still open",
    "request": 'the user asked: "{}"',
    "decision": '"{}": the choice, its reason or the option it replaced',
    "pending": '"{}": still open',
}
_DONE = frozenset({"completed", "complete", "done", "cancelled", "canceled"})


def _half(words: tuple[str, ...]) -> int:
    return max(2, math.ceil(len(words) / 2)) if len(words) >= 2 else len(words)


def _refs(calls: list[Call]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(call.ref for call in calls))


def _lines(text: str) -> list[tuple[str, str]]:
    """Each non-empty line, lowered, with the heading it falls under."""
    found = []
    heading = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        role = _ROLE.match(line)
        if role:
            heading = role.group(1).lower()
            continue
        lowered = line.lower()
        if _HEADING.match(line) or lowered.startswith("#"):
            heading = lowered
        for piece in lowered.split("; "):  # items of a list joined by "; " stand alone
            if not _names_only(piece):
                found.append((piece, heading))
    return found


def _names_only(line: str) -> bool:
    """A line that lists names and says nothing of them: after a short label, every item
    between commas or semicolons is one token."""
    label, colon, rest = line.partition(": ")
    body = rest if colon and len(label.split()) <= 3 else line
    items = [item.strip() for item in re.split(r"[,;]", body.strip().rstrip("."))]
    return len(items) >= 2 and all(_LIST_ITEM.match(item) for item in items if item)


def _has_word(line: str, word: str) -> bool:
    """`word` (lowered) in `line` with no letter or digit glued to either end."""
    word = word.lower()
    if not word:
        return False
    at = line.find(word)
    while at != -1:
        end = at + len(word)
        before = line[at - 1] if at else " "
        after = line[end] if end < len(line) else " "
        if not (word[0].isalnum() and before.isalnum()) and not (
            word[-1].isalnum() and after.isalnum()
        ):
            return True
        at = line.find(word, at + 1)
    return False


def _without(line: str, words: tuple[str, ...]) -> str:
    """`line` with every occurrence of `words` blanked (the anchor's own words are not its
    evidence: `timelineItems.ts` does not say it changed `timelineItems`)."""
    for word in sorted(words, key=len, reverse=True):
        line = line.replace(word.lower(), " ")
    return line
