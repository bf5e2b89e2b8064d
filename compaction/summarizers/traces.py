"""Traces: what happened to one handle of a span, in a clause, for the compaction addendum
(addendum.py) where no statement (statements.py) says it.

    tracer = Tracer(sources, handles)
    tracer.trace("command", "npm test")   # ("`npm test` ran 3×, last run passed", refs)
    tracer.brief("command", "npm test")   # ("ran", "`npm test` (3×, last passed)")

`trace` is a line of its own: a file read and not changed (or changed, by which tools), a
command and how its last run ended, an error and whether the same attempt passed after it,
the user's words around a number they gave, the sentence that named an identifier or a URL.
`brief` is the same said shortly, under a label, for the addendum's closing lines when
there are more lost handles than lines fit. Pure: no database, no settings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compaction.summarizers.base import Handles, SourceItem
from compaction.summarizers.fidelity import short_file_names
from compaction.summarizers.span import Call, error_key, read_span
from compaction.summarizers.words import clause

_QUOTE_WORDS = 16
_REQUEST_WORDS = 24
_CLEAN = re.compile(r"[\s\"`]+")
# The closing lines' labels, in the order they are written.
BRIEF_LABELS = {
    "changed": "Also changed",
    "read": "Also read, not changed",
    "named": "Also named",
    "ran": "Also ran",
    "failed": "Also failed",
    "number": "The user also gave",
    "ident": "Also worked with",
    "url": "Also fetched or cited",
}

Traced = tuple[str, tuple[str, ...]]  # (the clause, the messages it comes from)


class Tracer:
    def __init__(self, sources: Sequence[SourceItem], handles: Handles) -> None:
        self.sources = [s for s in sources if s.kind == "message"]
        self.by_ref = {s.ref: s for s in self.sources}
        self.span = read_span(sources)
        self.short = short_file_names(handles.get("file", {}))
        self.calls_of_file: dict[str, list[Call]] = {}
        self.calls_of_program: dict[str, list[Call]] = {}
        for call in self.span.calls:
            for path in call.files():
                self.calls_of_file.setdefault(path, []).append(call)
            if call.answered:
                for program in call.command_kinds():
                    self.calls_of_program.setdefault(program, []).append(call)

    def refs_naming(self, name: str, role: str | None = None) -> tuple[str, ...]:
        return tuple(
            s.ref for s in self.sources if name in s.content and (role is None or s.role == role)
        )

    def trace(self, kind: str, name: str) -> Traced | None:
        method = {
            "file": self._trace_file,
            "command": self._trace_command,
            "error": self._trace_error,
            "url": self._trace_url,
            "number": self._trace_number,
            "ident": self._trace_ident,
            "decision": self._trace_decision,
        }.get(kind)
        return method(name) if method else None

    def brief(self, kind: str, name: str) -> tuple[str, str] | None:
        """(label, the handle said shortly) for a closing line, or None."""
        if kind == "file":
            calls = self.calls_of_file.get(name, [])
            label = "changed" if any(c.edits() for c in calls) else "read" if calls else "named"
            return label, f"`{self.short.get(name, name)}`"
        if kind == "command":
            calls = self.calls_of_program.get(name, [])
            if not calls:
                return "ran", f"`{name}`"
            times = f"{len(calls)}×, " if len(calls) > 1 else ""
            return "ran", f"`{name}` ({times}last {'failed' if calls[-1].failed else 'passed'})"
        if kind == "error":
            failed = [c for c in self.span.calls if c.failed and name in c.output]
            outcome = "passed later" if failed and self.span.next_pass(failed[-1]) else "open"
            return "failed", f"`{clause(name, 8)}` ({outcome})"
        if kind in ("ident", "url", "number"):
            return kind, name if kind == "number" else f"`{name}`"
        return None

    def requests(self) -> list[tuple[str, str, float]]:
        """(line, ref, recency) for each typed request, its opening words quoted (a
        statement may have kept its later sentences instead)."""
        typed = self.span.prose("user")
        last = max(1, self.span.size - 1)
        return [
            (f'The user asked: "{clause(p.text, _REQUEST_WORDS)}"', p.ref, p.index / last)
            for p in typed
            if p.text.strip()
        ]

    def _trace_file(self, path: str) -> Traced | None:
        calls = self.calls_of_file.get(path, [])
        short = self.short.get(path, path)
        if calls:
            tools = ", ".join(dict.fromkeys(c.tool for c in calls))
            verb = "changed" if any(c.edits() for c in calls) else "read, not changed"
            return f"`{short}` {verb} (by {tools})", tuple(dict.fromkeys(c.ref for c in calls))
        refs = self.refs_naming(path) or self.refs_naming(short)
        return (f"`{short}` named {self.said_in(short, refs[-1])}", refs) if refs else None

    def _trace_command(self, program: str) -> Traced | None:
        calls = self.calls_of_program.get(program, [])
        if not calls:
            refs = self.refs_naming(program)
            return (
                (f"`{program}` mentioned {self.said_in(program, refs[-1])}", refs) if refs else None
            )
        last = calls[-1]
        outcome = f"failed (`{error_key(last.output)}`)" if last.failed else "passed"
        times = f" {len(calls)}×" if len(calls) > 1 else ""
        return f"`{program}` ran{times}, last run {outcome}", tuple(c.ref for c in calls)

    def _trace_error(self, error: str) -> Traced | None:
        calls = [c for c in self.span.calls if c.failed and error in c.output]
        if not calls:
            refs = self.refs_naming(error)
            return (f"`{error}` {self.said_in(error, refs[-1])}", refs) if refs else None
        last = calls[-1]
        passed = self.span.next_pass(last)
        outcome = "a later run passed" if passed else "still open: not seen passing after it"
        label = last.program() or last.tool
        refs = tuple(c.ref for c in calls) + ((passed.ref,) if passed else ())
        return f"Error `{clause(error, 12)}` from `{label}`: {outcome}", refs

    def _trace_url(self, url: str) -> Traced | None:
        calls = [c for c in self.span.calls if url in str(c.input)]
        if calls:
            return f"{url} fetched by {calls[-1].tool}", tuple(c.ref for c in calls)
        refs = self.refs_naming(url)
        return (f"{url} cited {self.said_in(url, refs[-1])}", refs) if refs else None

    def _trace_number(self, number: str) -> Traced | None:
        refs = self.refs_naming(number, "user")
        return (f'The user said: "{self.quote(number, refs[-1])}"', refs) if refs else None

    def _trace_ident(self, name: str) -> Traced | None:
        refs = self.refs_naming(name)
        return (f"`{name}` named {self.said_in(name, refs[-1])}", refs) if refs else None

    def _trace_decision(self, sentence: str) -> Traced | None:
        refs = self.refs_naming(sentence[:60])
        return (f"Decided: {sentence}", refs[-1:]) if refs else None

    def quote(self, name: str, ref: str) -> str:
        """The words around `name` in the message `ref`: its sentence, cut around it."""
        content = self.by_ref[ref].content
        at = max(0, content.find(name))
        start = max(content.rfind(". ", 0, at), content.rfind("\n", 0, at)) + 1
        ends = [e for e in (content.find(". ", at + len(name)), content.find("\n", at)) if e > 0]
        words = content[start : min(ends) if ends else len(content)].split()
        if len(words) > _QUOTE_WORDS:
            index = next((n for n, word in enumerate(words) if name in word), 0)
            low = max(0, min(index - _QUOTE_WORDS // 2, len(words) - _QUOTE_WORDS))
            words = words[low : low + _QUOTE_WORDS]
        return _CLEAN.sub(" ", " ".join(words)).strip()

    def said_in(self, name: str, ref: str) -> str:
        role = self.by_ref[ref].role
        who = {"user": "by the user", "assistant": "by the assistant"}.get(role, "in a tool output")
        return f'{who}: "{self.quote(name, ref)}"'
