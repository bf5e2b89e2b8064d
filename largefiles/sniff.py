"""Guess a file's kind from its beginning, when neither a MIME type nor a file name says.

In order: a shebang; JSON's `{`/`[`; an XML prolog or root tag; code, by counting lines that
only one language would write (outside Markdown code fences), needing at least three; YAML;
Markdown headings (text); a delimited table (CSV/TSV); otherwise text.
"""

from __future__ import annotations

import csv
import re

from .kinds import Kind

_SAMPLE_LINES = 200
_MIN_CODE_LINES = 3

_SHEBANGS = (
    (re.compile(r"python"), "python"),
    (re.compile(r"\bts-node\b"), "typescript"),
    (re.compile(r"\b(node|deno|bun)\b"), "javascript"),
    (re.compile(r"\bruby\b"), "ruby"),
    (re.compile(r"\b(ba|z|k|da)?sh\b"), "shell"),
)


def _any(*patterns: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags)


# Lines characteristic of one language. Order breaks ties (most distinctive first).
_CODE_LINES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "sql",
        _any(
            r"^\s*create\s+(or\s+replace\s+)?(table|view|function|procedure|index|unique\s+index)\b",
            r"^\s*(insert\s+into|alter\s+table|drop\s+table)\b",
            flags=re.I,
        ),
    ),
    (
        "go",
        _any(
            r"^package \w+\s*$",
            r"^func ",
            r"^import (\(|\"[\w./-]+\")\s*$",
            r"^type \w+ (struct|interface)",
        ),
    ),
    (
        "java",
        _any(
            r"^package [\w.]+;\s*$",
            r"^import (static )?[\w.*]+;\s*$",
            r"^\s*(public|private|protected)\s.*\b(class|interface|enum|record)\s+\w+",
            r"^\s*@Override\s*$",
        ),
    ),
    (
        "rust",
        _any(
            r"^\s*(pub )?use [\w:{}, *]+;\s*$",
            r"^\s*(pub(\(\w+\))? )?(async )?(unsafe )?fn \w+",
            r"^impl\b",
            r"^#\[derive",
            r"\blet mut \w+",
        ),
    ),
    (
        "cpp",
        _any(
            r"^#include\s*<(iostream|vector|string|memory|map|algorithm|cstdint|cstdio)>",
            r"\bstd::\w+",
            r"^namespace \w+",
            r"^template\s*<",
        ),
    ),
    (
        "c",
        _any(
            r"^#include\s*[<\"]",
            r"^#define \w+",
            r"^typedef\s",
            r"^(static\s+)?(int|void|char|long|unsigned|double|float|size_t|struct \w+)\s*\**\s*\w+\(",
        ),
    ),
    (
        "typescript",
        _any(
            r"^(export\s+)?(interface|type)\s+\w+.*[={]",
            r":\s*(string|number|boolean|void|any|unknown)\b",
            r"^\s*(public|private|protected|readonly)\s+\w+\s*[:(]",
        ),
    ),
    (
        "javascript",
        _any(
            r"""^import\s.+\sfrom\s+['"].+['"];?\s*$""",
            r"\brequire\(['\"]",
            r"^module\.exports\b",
            r"^export\s+(default\s+)?(async\s+)?(function|class|const)\s",
            r"^(async\s+)?function\s*\*?\s*\w+\s*\(.*\)\s*\{",
            r"^(const|let|var)\s+\w+\s*=.*=>",
        ),
    ),
    (
        "python",
        _any(
            r"^import [\w.]+(\s+as\s+\w+)?(,\s*[\w.]+)*\s*$",
            r"^from [\w.]+ import [\w*(), ]+\s*$",
            r"^\s*(async )?def \w+\(.*\)\s*(->.*)?:\s*$",
            r"^\s*class \w+(\(.*\))?:\s*$",
            r"^if __name__ == ",
        ),
    ),
    (
        "ruby",
        _any(
            r"""^\s*require(_relative)?\s+['"]""",
            r"^\s*def (self\.)?\w+[?!=]?(\(.*\))?\s*$",
            r"^\s*end\s*$",
            r"^\s*(class|module) [A-Z][\w:]*(\s*<\s*[\w:]+)?\s*$",
            r"^\s*attr_(reader|writer|accessor)\s",
        ),
    ),
    (
        "shell",
        _any(
            r"^\s*(function\s+)?[\w-]+\s*\(\)\s*\{",
            r"^\s*function\s+[\w-]+\s*\{",
            r"^\s*(export\s+)?[A-Z_][A-Z0-9_]*=",
            r"^\s*(if|elif|while)\s+\[\[?\s",
            r"^\s*(fi|done|esac)\s*$",
            r"^set -[euxo]",
        ),
    ),
)
_MARKDOWN_HEADING = re.compile(r"^#{1,6} \S", re.MULTILINE)
_YAML_LINE = re.compile(r"^\s*(- |-$|[\w\"'][\w\"' ./-]*:(\s|$))")


def sniff(head: str) -> tuple[Kind, str | None]:
    stripped = head.lstrip("\ufeff \t\r\n")
    first_line = stripped.split("\n", 1)[0]
    if stripped.startswith("#!"):
        for pattern, language in _SHEBANGS:
            if pattern.search(first_line):
                return (Kind.CODE, language)
    if stripped[:1] in ("{", "["):
        return (Kind.JSON, None)
    if _looks_like_xml(stripped):
        return (Kind.XML, None)
    lines = [line[:300] for line in stripped.split("\n")[:_SAMPLE_LINES] if line.strip()]
    language = _code_language(lines)
    if language is not None:
        return (Kind.CODE, language)
    if _looks_like_yaml(lines[:40]):
        return (Kind.YAML, None)
    if _MARKDOWN_HEADING.search(stripped):
        return (Kind.TEXT, None)
    for delimiter, kind in (("\t", Kind.TSV), (",", Kind.CSV)):
        if _looks_delimited(lines[:21], delimiter):
            return (kind, None)
    return (Kind.TEXT, None)


def _looks_like_xml(text: str) -> bool:
    if text.startswith("<?xml"):
        return True
    if re.match(r"<(!doctype\s+html|html)\b", text, re.I):
        return False
    return re.match(r"<[A-Za-z_!][^>]{0,2000}>", text) is not None


def _code_language(lines: list[str]) -> str | None:
    scores = dict.fromkeys((language for language, _ in _CODE_LINES), 0)
    fenced = False
    for line in lines:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for language, pattern in _CODE_LINES:
            if pattern.search(line):
                scores[language] += 1
    # TypeScript is JavaScript with types, C++ is C with more: the richer one wins when present.
    if scores["typescript"] and scores["javascript"]:
        scores["typescript"] += scores["javascript"]
    if scores["cpp"] and scores["c"]:
        scores["cpp"] += scores["c"]
    best = max(scores, key=lambda language: scores[language])  # first of equals, in table order
    # A few lines of code are enough in a long sample; a tiny one must be half code.
    needed = _MIN_CODE_LINES if len(lines) >= 2 * _MIN_CODE_LINES else max(1, (len(lines) + 1) // 2)
    return best if scores[best] >= needed else None


def _looks_delimited(lines: list[str], delimiter: str) -> bool:
    # The last sampled line may be cut short by the sniff window; leave it out.
    sample = lines[:-1] if len(lines) > 3 else lines
    if len(sample) < 3:
        return False
    # Prose with one comma per line is not a table: sentences end in punctuation.
    if sum(1 for line in sample if line.rstrip().endswith((".", "!", "?"))) * 2 >= len(sample):
        return False
    try:
        rows = list(csv.reader(sample, delimiter=delimiter))
    except csv.Error:
        return False
    widths = {len(row) for row in rows}
    header_is_short = all(len(cell) <= 64 for cell in rows[0])
    return len(widths) == 1 and widths.pop() >= 2 and header_is_short


def _looks_like_yaml(lines: list[str]) -> bool:
    content = [line for line in lines if not line.lstrip().startswith("#")]
    if content[:1] and content[0].strip() in ("---", "%YAML 1.2", "%YAML 1.1"):
        return True
    if len(content) < 3 or not re.match(r"^[\w\"'][^:]*:(\s|$)", content[0]):
        return False
    return sum(1 for line in content if _YAML_LINE.match(line)) >= 0.8 * len(content)
