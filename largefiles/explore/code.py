"""Code exploration: imports, definitions with signatures (no bodies), line counts."""

from __future__ import annotations

from .budget import Outline, join_limited, plural
from .code_model import CodeOutline, Definition
from .code_patterns import outline_by_patterns
from .code_python import outline_python
from .code_sql import outline_sql

PYTHON_PARSE_CHARS = 1_000_000  # larger sources are outlined from their lines (parsing is slow)

LANGUAGE_NAMES = {
    "python": "Python",
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "go": "Go",
    "rust": "Rust",
    "java": "Java",
    "c": "C",
    "cpp": "C++",
    "ruby": "Ruby",
    "shell": "Shell",
    "sql": "SQL",
}


def explore_code(content: str, language: str) -> str:
    outline = _outline(content, language)
    lines = content.splitlines()
    blank = sum(1 for line in lines if not line.strip())
    summary = Outline()
    summary.add(
        f"{LANGUAGE_NAMES.get(language, language)} source: {plural(len(lines), 'line')} "
        f"({len(lines) - blank:,} non-blank), {plural(len(outline.definitions), 'definition')}."
    )
    for note in outline.notes[:12]:
        summary.add(note, limit=120)
    if outline.imports:
        summary.add(f"Imports ({len(outline.imports):,}): {join_limited(outline.imports, 480)}")
    if outline.names:
        summary.add(f"Other names ({len(outline.names):,}): {join_limited(outline.names, 240)}")
    _add_definitions(summary, outline.definitions)
    return summary.text()


def _outline(content: str, language: str) -> CodeOutline:
    if language == "sql":
        return outline_sql(content)
    if language == "python":
        small = len(content) <= PYTHON_PARSE_CHARS
        parsed = outline_python(content) if small else None
        if parsed is not None:
            return parsed
        fallback = outline_by_patterns(content, "python")
        reason = "does not parse as Python" if small else "too large to parse quickly"
        fallback.notes.insert(0, f"Note: {reason}; outline read from the lines.")
        return fallback
    return outline_by_patterns(content, language)


def _add_definitions(summary: Outline, definitions: list[Definition]) -> None:
    """Every top-level definition if they fit, then members in source order while they fit."""
    if not definitions:
        return
    limit = summary.max_tokens - 50  # room for the closing line
    lines = [_line(d) for d in definitions]
    top = [i for i, d in enumerate(definitions) if d.depth == 0]
    chosen: list[int] = []
    if top and _fits(summary, [lines[i] for i in top], limit):
        chosen = top
        for i in range(len(definitions)):
            if i in chosen:
                continue
            trial = sorted([*chosen, i])
            if not _fits(summary, [lines[j] for j in trial], limit):
                break
            chosen = trial
    else:
        probe = _probe(summary)
        chosen = list(range(probe.add_all(lines, limit=limit)))
    summary.add("Definitions (line: signature):")
    summary.add_all([lines[i] for i in chosen])
    shown = set(chosen)
    left = [d for i, d in enumerate(definitions) if i not in shown]
    if left:
        _add_names(summary, f"… {len(left):,} more not shown: ", [d.name for d in left])


def _add_names(summary: Outline, prefix: str, names: list[str]) -> None:
    for max_chars in (400, 240, 120, 60):
        if summary.add(prefix + join_limited(names, max_chars)):
            return


def _line(definition: Definition) -> str:
    indent = "  " * definition.depth
    return f"{indent}L{definition.line}: {definition.signature}"


def _probe(summary: Outline) -> Outline:
    probe = Outline(summary.max_tokens)
    probe.lines = [*summary.lines, "Definitions (line: signature):"]
    return probe


def _fits(summary: Outline, lines: list[str], limit: int) -> bool:
    return _probe(summary).add_all(lines, limit=limit) == len(lines)
