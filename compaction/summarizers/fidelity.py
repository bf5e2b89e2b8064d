"""A summary's fidelity: the share of its sources' handles it names (docs/compaction.md).

How a handle counts as named, per kind:

* file: the full path, its last two segments, or its file name when no other file of the
  span has the same name (`src/app.py` names `/repo/src/app.py`);
* command: program and subcommand as words (`git commit`), any spacing between them;
* error, url, ident: the text itself (errors and URLs ignoring case), not inside a longer word;
* number: the digits, not inside a word, a longer number, a time, a path or a ref (`msg:12`,
  `07:37`, `sum_4e..`), as it was drawn;
* decision: at least 60% of the sentence's longer words (the summary may reword it).

Pure and cheap: one lowered copy of the summary and a substring test or a small pattern per
handle (about a millisecond for a thousand handles over a 3,000-token summary).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from compaction.summarizers.handles import KINDS, Handles

_WORDS = re.compile(r"[a-z0-9_]{4,}")
_DECISION_SHARE = 0.6


@dataclass
class Fidelity:
    kept: dict[str, list[int]] = field(default_factory=dict)  # kind -> [named, total]
    dropped: dict[str, list[str]] = field(default_factory=dict)  # kind -> handles not named

    @property
    def total(self) -> int:
        return sum(total for _, total in self.kept.values())

    @property
    def named(self) -> int:
        return sum(named for named, _ in self.kept.values())

    @property
    def score(self) -> float | None:
        """Handles named / handles, or None when the sources had none."""
        return round(self.named / self.total, 4) if self.total else None

    def as_dict(self) -> dict:
        return {"score": self.score, "kept": self.kept, "dropped": self.dropped}


def measure(text: str, handles: Handles) -> Fidelity:
    """Which of `handles` the summary `text` names."""
    check = _Namer(text, handles.get("file", {}))
    result = Fidelity()
    for kind in KINDS:
        names = handles.get(kind)
        if not names:
            continue
        dropped = [name for name in names if not check.names(kind, name)]
        result.kept[kind] = [len(names) - len(dropped), len(names)]
        if dropped:
            result.dropped[kind] = dropped
    return result


def missing(handles: Handles, fidelity: Fidelity) -> Handles:
    """The handles `fidelity` found dropped, with their counts, in the handles' order."""
    return {
        kind: {name: handles[kind][name] for name in names}
        for kind, names in fidelity.dropped.items()
    }


def short_file_names(files: dict[str, int] | list[str]) -> dict[str, str]:
    """The shortest form of each path that still names it (see the module's docstring)."""
    names = Counter(path.rstrip("/").rsplit("/", 1)[-1] for path in files)
    short = {}
    for path in files:
        segments = [part for part in path.rstrip("/").split("/") if part]
        if not segments:
            short[path] = path
        elif names[segments[-1]] == 1:
            short[path] = segments[-1]
        else:
            short[path] = "/".join(segments[-2:]) if len(segments) > 1 else path
    return short


class _Namer:
    def __init__(self, text: str, files: dict[str, int]) -> None:
        self.text = text
        self.lowered = text.lower()
        self.words: set[str] | None = None
        self.short = short_file_names(files)

    def names(self, kind: str, name: str) -> bool:
        if kind == "file":
            return any(self._word(form, self.text) for form in self._file_forms(name))
        if kind == "command":
            pattern = r"(?<![\w/-])" + r"\s+".join(map(re.escape, name.split())) + r"(?![\w-])"
            return re.search(pattern, self.text) is not None
        if kind in ("error", "url"):
            return self._word(name.lower(), self.lowered)
        if kind == "number":
            # as the number was drawn: not in "msg:1", "07:37", "v2", a path or an id ("sum_4e")
            pattern = rf"(?<![\w.:/-]){re.escape(name)}(?![\w:/]|\.\d)"
            return re.search(pattern, self.text) is not None
        if kind == "decision":
            return self._decision(name)
        return self._word(name, self.text)

    def _file_forms(self, path: str) -> list[str]:
        segments = [part for part in path.rstrip("/").split("/") if part]
        forms = [path.rstrip("/")]
        if len(segments) >= 2:
            forms.append("/".join(segments[-2:]))
        if self.short.get(path) == (segments[-1] if segments else None):
            forms.append(segments[-1])
        return forms

    @staticmethod
    def _word(needle: str, haystack: str) -> bool:
        """`needle` in `haystack` with no word character glued to either end."""
        if not needle:
            return False
        at = haystack.find(needle)
        while at != -1:
            end = at + len(needle)
            before = haystack[at - 1] if at else " "
            after = haystack[end] if end < len(haystack) else " "
            glued_before = needle[0].isalnum() and (before.isalnum() or before == "_")
            glued_after = needle[-1].isalnum() and (after.isalnum() or after == "_")
            if not glued_before and not glued_after:
                return True
            at = haystack.find(needle, at + 1)
        return False

    def _decision(self, sentence: str) -> bool:
        wanted = set(_WORDS.findall(sentence.lower()))
        if not wanted:
            return sentence.lower() in self.lowered
        if self.words is None:
            self.words = set(_WORDS.findall(self.lowered))
        return len(wanted & self.words) >= _DECISION_SHARE * len(wanted)
