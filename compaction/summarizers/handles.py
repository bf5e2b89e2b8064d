"""Handles: the names a resumed session needs to find its way back (docs/compaction.md).

A source span's handles are drawn from its text, deterministically:

| kind | drawn from |
|---|---|
| file | paths in tool inputs (`file_path`, `path`, patch headers...) and in user/assistant prose |
| command | shell commands in tool inputs, as program + subcommand (`git commit`, `npm test`) |
| error | error names (`KeyError`, `HTTP 404`, `exit code 2`) and the first line of a failing tool result |
| ident | identifiers the assistant named (backticked, `call()`, `snake_case`, `CamelCase`) |
| url | URLs in tool inputs and prose |
| number | numbers and dates in what the user typed |
| decision | sentences the summarizer reads as decisions ("we'll use X instead of Y") |

Messages are read in the text form they are stored in (`[tool NAME id] {input}` lines for a
call, `[tool NAME id]` then the output for a result). A summary source contributes the
handles its own text names (the engine passes a child's stored handles instead, so a
condensed summary's handles are its children's). Pure: no database, no settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from compaction.summarizers.base import Handles, SourceItem
from compaction.summarizers.extract import EXTENSIONS, score_sentences, sentences, split_code

KINDS = ("file", "command", "error", "ident", "url", "number", "decision")

_TOOL_LINE = re.compile(r"^\[tool ([^\]\s]+)(?: [^\]\s]+)?\](?: (.*))?$")
_FILE_KEYS = (
    "file_path",
    "filePath",
    "path",
    "notebook_path",
    "absolute_path",
    "target_file",
    "file",
    "filename",
    "dir_path",
)
_COMMAND_KEYS = ("command", "cmd")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_SKIP_PROGRAMS = frozenset({"cd", "echo", "true", "false", "sleep", "export", "set", "sudo", "env"})
# Programs whose second word is a subcommand (`git commit`); for others it is an argument.
_SUBCOMMANDED_WORDS = """git gh npm npx pnpm yarn bun deno cargo go docker podman kubectl helm pip pip3 uv poetry
    conda brew apt apt-get systemctl journalctl dotnet mvn gradle make just rustup terraform
    aws gcloud az heroku flyctl vercel supabase django-admin alembic rails bundle composer
    mix dune stack cabal nix opencode claude codex gemini lcm"""
_SUBCOMMANDED = frozenset(_SUBCOMMANDED_WORDS.split())
_WORD_ARG = re.compile(r"^[a-z][a-z0-9_:-]*$")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'[^\']*\'', re.S)
_PROGRAM = re.compile(r"^[a-z0-9][\w.+-]*$", re.A)
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CHAIN = re.compile(r"&&|\|\||;|\||\n")
_ERROR_NAME = re.compile(
    r"(?<![\w.])(?:[A-Z]\w*(?:Error|Exception|Fault)|HTTP [45]\d\d|exit (?:code|status) [1-9]\d*)"
    r"(?!\w)",
    re.A,
)
# Read on the first line of a tool's output (a tool error, a shell's exit code, a crash).
_FAILING = re.compile(
    r"<tool_use_error>|^\s*(?:error|fatal|failed|failure)\b|^\w*error:|^Traceback \(most recent"
    r"|exit code [1-9]|exit status [1-9]|command not found|No such file or directory"
    r"|Permission denied|\bFAILED\b|\bpanicked\b",
    re.I,
)
_NUMBER = re.compile(r"(?<![\w.:/-])(\d{4}-\d{2}-\d{2}|\d+(?:[.,:]\d+)*)(?![\w:/]|\.\d)", re.A)
_LIST_MARKER = re.compile(r"^\s*\d{1,3}[.)]\s", re.M)
_INJECTED = re.compile(r"<(system-reminder|command-[a-z]+|local-command-[a-z]+)>.*?</\1>", re.S)
_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_CALL = re.compile(r"\b[A-Za-z_][\w.]*\(\)", re.A)
_SNAKE = re.compile(r"(?<![\w./-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w/-]|\.\w)", re.A)
_MODULE = re.compile(r"(?<![\w./-])[a-z_]\w*(?:\.[a-z_]\w*){2,}(?![\w/-]|\.\w)", re.A)
_PATH_CHARS = re.compile(r"^[\w./~@+-]+$")
_IDENT_NOISE = frozenset({"tool_use", "tool_result", "tool_call", "tool_use_id", "Traceback"})
_DECISION_MAX = 100
_TYPED_MAX = 2_000  # characters of a user message read as typed (longer is mostly a paste)
_OUTPUT_SCAN = 4_000  # characters of a tool output read for its failure


def draw_handles(sources: Sequence[SourceItem], carried: Sequence[Handles | None] = ()) -> Handles:
    """The handles of `sources`, in last-seen order. `carried[i]`, when given, stands for
    source i's handles (a child summary's stored ones) instead of its text's."""
    found = _Collector()
    for index, item in enumerate(sources):
        given = carried[index] if index < len(carried) else None
        if given is not None:
            found.merge(given)
        elif item.kind == "summary":
            _from_prose(found, item.content, role="assistant")
        elif item.role == "tool":
            _from_tool_output(found, item.content)
        elif item.role in ("user", "assistant"):
            _from_message(found, item.content, item.role)
    return found.finish()


def merge_handles(sets: Iterable[Handles]) -> Handles:
    found = _Collector()
    for handles in sets:
        found.merge(handles)
    return found.finish()


def count(handles: Handles) -> int:
    return sum(len(names) for names in handles.values())


class _Collector:
    def __init__(self) -> None:
        self.handles: Handles = {kind: {} for kind in KINDS}

    def add(self, kind: str, name: str, times: int = 1) -> None:
        name = name.strip()
        if not name or len(name) > 300:
            return
        bucket = self.handles[kind]
        seen = bucket.pop(name, 0)
        bucket[name] = seen + times  # re-inserted: the end is the most recent

    def merge(self, handles: Handles) -> None:
        for kind, names in handles.items():
            if kind in self.handles:
                for name, times in names.items():
                    self.add(kind, name, times)

    def finish(self) -> Handles:
        files = self.handles["file"]
        # "app.py" in prose is the "/repo/src/app.py" a tool touched: longest names first,
        # so a name is folded into one that is still there
        for name in sorted(files, key=len, reverse=True):
            tail = "/" + name
            owner = next((p for p in files if p.endswith(tail)), None)
            if owner:
                files[owner] += files.pop(name)
        idents = self.handles["ident"]
        basenames = {path.rstrip("/").rsplit("/", 1)[-1] for path in files}
        for name in list(idents):
            if name in files or name in basenames or name in self.handles["command"]:
                idents.pop(name)
        return {kind: names for kind, names in self.handles.items() if names}


def _from_message(found: _Collector, content: str, role: str) -> None:
    """Prose, tool calls, and what follows a call inside the same message: the call's output
    (Gemini CLI and OpenCode keep calls and results in the assistant's message)."""
    prose: list[str] = []
    output: list[str] = []
    after_call = False
    for line in content.splitlines():
        call = _TOOL_LINE.match(line) if line.startswith("[tool ") else None
        if call:
            if output:
                _from_tool_output(found, "\n".join(output))
            output, after_call = [], True
            _from_tool_input(found, call.group(2) or "")
        elif after_call:
            output.append(line)
        else:
            prose.append(line)
    if output:
        _from_tool_output(found, "\n".join(output))
    _from_prose(found, "\n".join(prose), role=role)


def _from_tool_input(found: _Collector, raw: str) -> None:
    try:
        given = json.loads(raw) if raw.startswith("{") else None
    except ValueError:
        given = None
    if not isinstance(given, dict):
        return
    for key in _FILE_KEYS:
        value = given.get(key)
        if isinstance(value, str) and 1 < len(value) < 300 and "\n" not in value:
            found.add("file", value)
    for key in _COMMAND_KEYS:
        value = given.get(key)
        if isinstance(value, list):
            value = " ".join(str(part) for part in value)
        if isinstance(value, str):
            for name in command_kinds(value):
                found.add("command", name)
    url = given.get("url")
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        found.add("url", url.rstrip("/"))
    for value in given.values():  # an apply_patch body names its files in headers
        if isinstance(value, str) and "*** " in value:
            for path in _PATCH_FILE.findall(value):
                found.add("file", path.strip())


def command_kinds(command: str) -> list[str]:
    """ "cd x && git commit -m y | tee z" -> ["git commit", "tee"]: each chained command's
    program (its path dropped) and its subcommand when the next word is one."""
    kinds = []
    # The first line only (continuations joined): later lines are a heredoc's or an inline
    # script's body (`python -c "..."`), not commands.
    command = command[:2_000].replace("\\\n", " ").split("\n", 1)[0]
    command = _QUOTED.sub('""', command)
    for piece in _CHAIN.split(command):
        words = [w for w in piece.strip().split() if not _ENV_ASSIGNMENT.match(w)]
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1].strip("\"'()")
        if program in _SKIP_PROGRAMS or not _PROGRAM.match(program):
            continue
        rest = words[1:]
        if program.startswith("python") and rest[:1] == ["-m"] and len(rest) > 1:
            kinds.append(f"{program} -m {rest[1]}")
        elif program in _SUBCOMMANDED and rest and _WORD_ARG.match(rest[0]):
            kinds.append(f"{program} {rest[0]}")
        else:
            kinds.append(program)
    return kinds


def _from_tool_output(found: _Collector, content: str) -> None:
    head = content[:_OUTPUT_SCAN]
    body = head.split("\n", 1)[1] if head.startswith("[tool ") and "\n" in head else head
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    if not _FAILING.search(first):
        return
    names = _ERROR_NAME.findall(body)
    for name in names:
        found.add("error", name)
    if not names:
        line = re.sub(r"</?tool_use_error>", "", first).strip()
        if line:
            found.add("error", _clip(line, 80))


def _from_prose(found: _Collector, text: str, *, role: str) -> None:
    if role == "user":
        text = _INJECTED.sub(" ", text)
        if text.lstrip().startswith(("<", "Caveat:")):
            return
        text = text[:_TYPED_MAX]
    prose, _ = split_code(text)
    units = sentences(prose)
    for unit, signals in zip(units, score_sentences(units), strict=True):
        for kind, entity in signals.entities:
            if kind == "path" and _looks_like_file(entity):
                found.add("file", entity)
            elif kind == "url":
                found.add("url", entity.rstrip("/"))
            elif kind == "error":
                found.add("error", entity)
        if "decision" in signals.kinds:
            found.add("decision", _clip(unit, _DECISION_MAX))
    if role == "user":
        for number in _NUMBER.findall(_LIST_MARKER.sub(" ", prose)):
            found.add("number", number)
    elif role == "assistant":
        _identifiers(found, prose)


def _identifiers(found: _Collector, prose: str) -> None:
    """What the assistant named as code: `backticked` names (a backticked path is a file),
    calls `name()`, snake_case names and dotted module paths; plain CamelCase words
    ("TypeScript") are left out."""
    for quoted in _BACKTICKED.findall(prose):
        quoted = quoted.strip()
        if not quoted or any(ch.isspace() for ch in quoted):
            continue
        if "/" in quoted or quoted.rpartition(".")[2].lower() in EXTENSIONS:
            if _looks_like_file(quoted):
                found.add("file", quoted)
        elif _worth_naming(quoted):
            found.add("ident", quoted)
    bare = _BACKTICKED.sub(" ", prose)
    for pattern in (_CALL, _SNAKE, _MODULE):
        for name in pattern.findall(bare):
            if _worth_naming(name):
                found.add("ident", name)


def _looks_like_file(entity: str) -> bool:
    """Prose "a/b/c" is often not a path ("Start/Pause/Reset", "if/elif", "docs/"): a rooted
    path or a name with a stem and an extension is."""
    if not _PATH_CHARS.match(entity):
        return False
    if entity.startswith(("/", "./", "../", "~/")):
        return len(entity) > 2
    stem, dot, extension = entity.rstrip("/").rsplit("/", 1)[-1].rpartition(".")
    return bool(dot and stem and extension.isalnum())


def _worth_naming(entity: str) -> bool:
    return (
        len(entity) >= 3
        and entity[0].isalpha() | (entity[0] == "_")
        and not entity.replace(".", "").isdigit()
        and entity not in _IDENT_NOISE
        and not entity.startswith("toolu_")
    )


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut or text[:limit]
