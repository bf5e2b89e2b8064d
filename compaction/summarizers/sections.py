"""The sections of a summary that say what happened, written from statements and read back.

    Asked:
    - "Make the cache expire after 300 seconds" (msg:1)
    Changed:
    - store.py edited 2× (`CacheStore.evict`, `ttl`): make entries expire (msg:5, msg:9)
    Errors and outcomes:
    - `KeyError: 'ttl'` (`python -m pytest`): fixed by editing store.py (`ttl`) (msg:7, msg:11)
    Decided:
    - We'll use CacheStore.evict() instead of a timer, because a timer leaks threads (msg:3)
    Open:
    - task (in_progress): add the eviction test (msg:12)
    State: the assistant last said: ...; last command `python -m pytest` passed (msg:12)

A heading is a line of its own; each statement a bullet ending with the refs of the
messages it comes from (the first and the last). The state is one line. A condensed summary
reads its children's sections back (`read_sections`) as statements, so what happened
survives the levels; the explorer shows each section under its heading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compaction.summarizers.statements import Features, Statement

HEADINGS = {
    "request": "Asked",
    "file": "Changed",
    "error": "Errors and outcomes",
    "decision": "Decided",
    "task": "Open",
}
STATE_LABEL = "State"
EXCERPTS = "Excerpts"  # heading of the quoted sentences that follow the statements
_KIND_OF = {heading + ":": kind for kind, heading in HEADINGS.items()}
_REFS = re.compile(r"\s\((msg:\d+(?:, msg:\d+)*)\)$")


def bullet(statement: Statement) -> str:
    refs = statement.refs if len(statement.refs) <= 2 else (statement.refs[0], statement.refs[-1])
    return f"- {statement.text} ({', '.join(refs)})" if refs else f"- {statement.text}"


def state_line(statement: Statement) -> str:
    return bullet(statement).replace("- ", f"{STATE_LABEL}: ", 1)


def render_sections(statements: list[Statement]) -> list[str]:
    """The lines of the sections, in `HEADINGS` order then the state; each section's
    statements in the order they happened."""
    lines: list[str] = []
    for kind, heading in HEADINGS.items():
        chosen = [s for s in statements if s.kind == kind]
        if chosen:
            lines.append(heading + ":")
            lines.extend(bullet(s) for s in sorted(chosen, key=_first_ref))
    lines.extend(state_line(s) for s in statements if s.kind == "state")
    return lines


@dataclass
class Section:
    heading: str
    lines: list[str]


def split_sections(text: str) -> tuple[list[Section], list[str]]:
    """(the sections of a summary, its other lines). The state line and the excerpts are
    sections too; a section ends at the next heading or at a line that is not a bullet."""
    sections: list[Section] = []
    other: list[str] = []
    current: Section | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in _KIND_OF or stripped == EXCERPTS + ":":
            current = Section(stripped[:-1], [])
            sections.append(current)
        elif stripped.startswith(STATE_LABEL + ": "):
            sections.append(Section(STATE_LABEL, [stripped[len(STATE_LABEL) + 2 :]]))
            current = None
        elif current is not None and stripped.startswith("- "):
            current.lines.append(stripped[2:])
        else:
            current = None
            other.append(line)
    return sections, other


def read_sections(text: str, recency: float) -> list[Statement]:
    """The statements a summary's sections hold (excerpts are not statements), each given
    `recency` (where the summary falls among its siblings)."""
    found = []
    sections, _ = split_sections(text)
    for section in sections:
        kind = "state" if section.heading == STATE_LABEL else _KIND_OF.get(section.heading + ":")
        if kind is None:
            continue
        for line in section.lines:
            refs = _REFS.search(line)
            body = line[: refs.start()] if refs else line
            cited = tuple(refs.group(1).split(", ")) if refs else ()
            features = Features(recency, 1, kind == "request", kind in ("task", "state"))
            found.append(Statement(kind, body, cited, body, features))
    return found


def _first_ref(statement: Statement) -> tuple[int, str]:
    ref = statement.refs[0] if statement.refs else ""
    tail = ref.partition(":")[2]
    return (int(tail), ref) if tail.isdigit() else (0, ref)
