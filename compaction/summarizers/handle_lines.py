"""The handle lines of a deterministic summary: the span's handles, ranked, in a budget.

    Files: store.py, src/app.py, deploy/values.yaml
    Commands: git commit, python -m pytest, npm run
    Errors: KeyError, error: pathspec 'x' did not match any file(s)
    Identifiers: CacheStore.evict(), MAX_RETRIES
    URLs: https://docs.python.org/3/library/functools.html
    User numbers: 300, 5
    Decisions: We'll use CacheStore.evict() instead of a timer; ...

Ranked when they do not all fit: errors and the numbers the user typed first (they cannot be
found again without their names), then the files, commands and URLs the work touched, then
identifiers and decisions; within each, by how often a handle recurs, then the most recent
first. A handle that does not fit is skipped and smaller ones after it still get in; two
handles written the same way are written once. Files are written in their shortest unambiguous
form (fidelity.short_file_names), so a long absolute path costs a file name.
"""

from __future__ import annotations

from compaction.summarizers.base import Handles
from compaction.summarizers.budget import Estimator
from compaction.summarizers.fidelity import short_file_names

LABELS = {
    "file": "Files",
    "command": "Commands",
    "error": "Errors",
    "ident": "Identifiers",
    "url": "URLs",
    "number": "User numbers",
    "decision": "Decisions",
}
# Rank tiers (lower first): what cannot be found again without its name, then what the
# work touched (a recurring identifier must not crowd out the files), then the rest.
_TIER = {"error": 0, "number": 0, "file": 1, "command": 1, "url": 1, "ident": 2, "decision": 2}
_SEPARATORS = {"decision": "; "}


def ranked(handles: Handles, extras: Handles | None = None) -> list[tuple[str, str]]:
    """(kind, handle), most worth keeping first; `extras` (facts that are not handles, such
    as identifiers the user named) after every handle. Deterministic: ties go to the most
    recent, then to the order of the kinds."""
    order = list(LABELS)
    entries = []
    for tier, given in ((0, handles), (1, extras or {})):
        for kind, names in given.items():
            if kind not in LABELS:
                continue
            size = len(names)
            for position, (name, times) in enumerate(names.items()):
                if tier and name in handles.get(kind, ()):
                    continue
                recency = size - position  # 1 = the most recent
                rank = (tier, _TIER[kind], -times, recency, order.index(kind))
                entries.append((rank, kind, name))
    entries.sort(key=lambda entry: entry[0])
    return [(kind, name) for _, kind, name in entries]


def display_name(kind: str, name: str, short_files: dict[str, str]) -> str:
    return short_files.get(name, name) if kind == "file" else name


def pick_handles(
    handles: Handles,
    cap: int,
    estimator: Estimator,
    extras: Handles | None = None,
    among: Handles | None = None,
) -> dict[str, list[str]]:
    """The handles that fit `cap` tokens as lines, kind -> display names in rank order.
    `among`: the whole span's handles when `handles` is what is left of them, so a file's
    short form is the one that names it among all of the span's files."""
    short_files = short_file_names((among or handles).get("file", {}))
    chosen: dict[str, list[str]] = {}
    shown_before: set[tuple[str, str]] = set()
    used = 0
    for kind, name in ranked(handles, extras):
        shown = display_name(kind, name, short_files)
        if (kind, shown) in shown_before:  # two paths with one short form: named once
            continue
        label = 0 if kind in chosen else estimator(LABELS[kind] + ": \n")
        cost = label + estimator(shown + _SEPARATORS.get(kind, ", "))
        if used + cost <= cap:
            chosen.setdefault(kind, []).append(shown)
            shown_before.add((kind, shown))
            used += cost
    return chosen


def render_handles(chosen: dict[str, list[str]]) -> list[str]:
    return [
        f"{LABELS[kind]}: {_SEPARATORS.get(kind, ', ').join(chosen[kind])}"
        for kind in LABELS
        if chosen.get(kind)
    ]


def handle_lines_cost(chosen: dict[str, list[str]], estimator: Estimator) -> int:
    return sum(estimator(line + "\n") for line in render_handles(chosen))
