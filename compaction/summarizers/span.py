"""A span of stored messages read as what happened in it: typed requests, the assistant's
prose, tool calls (with their parsed input) and tool outputs (with whether they failed).

Mechanical only: no ranking and no judgement. Both the statements of a summary
(statements.py) and the relation probes that measure summaries (relations.py) read a span
through this, each with its own rules. Messages are read in the text form they are stored
in: a call is a `[tool NAME id] {input}` line, a result a `[tool NAME id]` line then its
output; lines after a call inside the same message are that call's output (Gemini CLI and
OpenCode keep both in the assistant's message).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from compaction.summarizers.base import SourceItem
from compaction.summarizers.extract import sentences, split_code
from compaction.summarizers.handles import command_kinds
from compaction.summarizers.words import identifiers

_TOOL_LINE = re.compile(r"^\[tool ([^\]\s]+)(?: ([^\]\s]+))?\](?: (.*))?$")
_INJECTED = re.compile(r"<(system-reminder|command-[a-z]+|local-command-[a-z]+)>.*?</\1>", re.S)
# A user message that nobody typed: a resumed session's summary, a hook's or a command's text.
_NOT_TYPED = (
    "<",
    "Caveat:",
    "This session is being continued from a previous conversation",
    "[Request interrupted",
    "Base directory for this skill:",
)
# First line of a tool output that reports a failure (a tool error, a shell's exit code).
_FAILING = re.compile(
    r"<tool_use_error>|^\s*(?:error|fatal|failed|failure)\b|^\w*error:|^Traceback \(most recent"
    r"|exit code [1-9]|exit status [1-9]|command not found|No such file or directory"
    r"|Permission denied|\bFAILED\b|\bpanicked\b|^\s*Exit code:? [1-9]",
    re.I,
)
_FILE_KEYS = ("file_path", "filePath", "path", "notebook_path", "absolute_path", "target_file")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)
_OUTPUT_SCAN = 4_000
_FILTERS = frozenset(
    [
        "tail",
        "head",
        "grep",
        "sort",
        "wc",
        "tee",
        "less",
        "cat",
        "awk",
        "sed",
        "cut",
        "uniq",
        "xargs",
        "jq",
        "tr",
    ]
)
_ERROR_NAME = re.compile(
    r"(?<![\w.])(?:[A-Z]\w*(?:Error|Exception|Fault)|HTTP [45]\d\d|exit (?:code|status) [1-9]\d*)"
    r"(?!\w)",
    re.A,
)
_ERROR_CHARS = 110
_MECHANICS = re.compile(
    r"has not been read yet|String to replace not found|Found \d+ matches of the string"
    r"|modified since read|InputValidationError|user doesn't want to proceed|was rejected"
    r"|Request interrupted|File does not exist\.|0 occurrences found for old_string"
    r"|Failed to edit, could not find",
    re.I,
)
_TASK_NUMBER = re.compile(r"Task #(\w+)")

# Tools that change a file, by lowercased name (Claude Code, Codex, Gemini CLI, OpenCode).
EDIT_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "str_replace_based_edit_tool",
        "str_replace_editor",
        "apply_patch",
        "replace",
        "write_file",
        "patch",
        "create_file",
        "edit_file",
    }
)
# Tools that write the agent's task list.
TASK_TOOLS = frozenset(
    {"todowrite", "write_todos", "update_plan", "taskcreate", "taskupdate", "todo_write"}
)


@dataclass
class Call:
    tool: str  # as the agent named it
    call_id: str
    input: dict
    ref: str
    index: int  # position of the message in the span
    output: str = ""
    failed: bool = False
    answered: bool = False

    @property
    def name(self) -> str:
        return self.tool.lower()

    def files(self) -> list[str]:
        found = [
            value
            for key in _FILE_KEYS
            if isinstance(value := self.input.get(key), str) and 1 < len(value) < 300
        ]
        for value in self.input.values():  # an apply_patch body names its files
            if isinstance(value, str) and "*** " in value:
                found.extend(path.strip() for path in _PATCH_FILE.findall(value))
        return list(dict.fromkeys(found))

    def command(self) -> str:
        for key in ("command", "cmd"):
            value = self.input.get(key)
            if isinstance(value, list):  # Codex: ["bash", "-lc", "the command"]
                shell = len(value) == 3 and value[1] in ("-c", "-lc") and str(value[2])
                value = shell or " ".join(str(part) for part in value)
            if isinstance(value, str):
                return value
        return ""

    def command_kinds(self) -> list[str]:
        command = self.command()
        return command_kinds(command) if command else []

    def program(self) -> str:
        """The command a shell call runs: its first program that is not a filter of
        another's output (`python -m pytest | tail` runs `python -m pytest`)."""
        kinds = self.command_kinds()
        return next((k for k in kinds if k.split()[0] not in _FILTERS), kinds[0] if kinds else "")

    def target(self) -> tuple[str, ...]:
        """What a later run must match to count as the same attempt: the same command, or
        the same tool on the same file."""
        program = self.program()
        return ("command", program) if program else ("tool", self.name, *self.files()[:1])

    def edits(self) -> bool:
        return self.name in EDIT_TOOLS and not self.failed


@dataclass
class Prose:
    role: str  # user | assistant
    text: str  # injected blocks and code bodies removed
    ref: str
    index: int
    sentences: list[str] = field(default_factory=list)


@dataclass
class Task:
    text: str
    status: str  # pending | in_progress | completed | ... as the agent wrote it
    ref: str  # the message that last set it
    index: int


@dataclass
class ReadSpan:
    """A span in order: `events` holds Prose and Call items as they happened."""

    events: list[Prose | Call]
    size: int  # number of messages

    @property
    def calls(self) -> list[Call]:
        return [event for event in self.events if isinstance(event, Call)]

    def prose(self, role: str | None = None) -> list[Prose]:
        return [
            event
            for event in self.events
            if isinstance(event, Prose) and (role is None or event.role == role)
        ]

    def next_pass(self, failed: Call) -> Call | None:
        """The next run of the same attempt (`Call.target`) after `failed` that did not fail."""
        calls = self.calls
        target = failed.target()
        for call in calls[calls.index(failed) + 1 :]:
            if call.answered and not call.failed and call.target() == target:
                return call
        return None

    def said_before(self, call: Call) -> str:
        """The assistant's last sentence before `call`, its stated purpose; "" when another
        edit or command came between them (the sentence was that one's purpose)."""
        position = self.events.index(call)
        for event in reversed(self.events[max(0, position - 6) : position]):
            if isinstance(event, Prose):
                ok = event.role == "assistant" and event.sentences
                return event.sentences[-1] if ok else ""
            if event.name in EDIT_TOOLS or event.command():
                return ""
        return ""

    def answered(self, prose: Prose) -> bool:
        """Whether the span ends with the assistant's words after `prose` (rather than with
        work still going, or nothing, after it)."""
        after = self.events[self.events.index(prose) + 1 :]
        return bool(after) and isinstance(after[-1], Prose) and after[-1].role == "assistant"

    def between(self, first: Call, last: Call) -> list[Call]:
        calls = self.calls
        return calls[calls.index(first) + 1 : calls.index(last)]

    def task_list(self) -> list[Task]:
        """The agent's task list as the span leaves it: the last full list it wrote
        (TodoWrite, write_todos, update_plan, todowrite), with the tasks it created and
        updated one by one after it (TaskCreate, TaskUpdate)."""
        tasks: dict[str, Task] = {}
        for call in self.calls:
            if call.name == "taskcreate":
                number = _TASK_NUMBER.search(call.output)
                key = number.group(1) if number else str(len(tasks) + 1)
                text = _task_text(call.input)
                if text:
                    tasks[key] = Task(text, "pending", call.ref, call.index)
            elif call.name == "taskupdate":
                task = tasks.get(str(call.input.get("taskId", "")))
                if task is not None and isinstance(call.input.get("status"), str):
                    task.status, task.ref, task.index = call.input["status"], call.ref, call.index
            elif call.name in TASK_TOOLS:
                items = call.input.get("todos") or call.input.get("plan")
                if isinstance(items, list):
                    tasks = {}
                    for n, item in enumerate(items):
                        text = _task_text(item) if isinstance(item, dict) else ""
                        if text:
                            status = str(item.get("status") or "pending")
                            tasks[str(n)] = Task(text, status, call.ref, call.index)
        return list(tasks.values())


def _task_text(given: dict) -> str:
    for key in ("content", "step", "description", "subject", "activeForm"):
        value = given.get(key)
        if isinstance(value, str) and value.strip():
            return " ".join(value.split())
    return ""


def read_span(sources: Sequence[SourceItem]) -> ReadSpan:
    events: list[Prose | Call] = []
    calls: dict[str, Call] = {}
    messages = [item for item in sources if item.kind == "message"]
    for index, item in enumerate(messages):
        if item.role == "tool":
            _read_output(item.content, calls)
        elif item.role == "user":
            _read_user(item, index, events, calls)
        elif item.role == "assistant":
            _read_assistant(item, index, events, calls)
    return ReadSpan(events, len(messages))


def _read_user(item: SourceItem, index: int, events: list, calls: dict[str, Call]) -> None:
    text = item.content
    if text.startswith("[tool "):  # a tool result stored in a user message
        _read_output(text, calls)
        return
    text = _INJECTED.sub(" ", text).strip()
    if not text or text.startswith(_NOT_TYPED):
        return
    prose, _ = split_code(text)
    events.append(Prose("user", prose.strip(), item.ref, index, sentences(prose)))


def _read_assistant(item: SourceItem, index: int, events: list, calls: dict[str, Call]) -> None:
    prose: list[str] = []
    current: Call | None = None
    output: list[str] = []

    def flush_prose() -> None:
        if prose:
            text, _ = split_code("\n".join(prose))
            if text.strip():
                events.append(Prose("assistant", text.strip(), item.ref, index, sentences(text)))
            prose.clear()

    for line in item.content.splitlines():
        match = _TOOL_LINE.match(line) if line.startswith("[tool ") else None
        if match:
            flush_prose()
            if current is not None and output:
                _answer(current, "\n".join(output))
            output = []
            current = Call(
                match.group(1), match.group(2) or "", _json(match.group(3)), item.ref, index
            )
            events.append(current)
            if current.call_id:
                calls[current.call_id] = current
        elif current is not None:
            output.append(line)
        else:
            prose.append(line)
    flush_prose()
    if current is not None and output:
        _answer(current, "\n".join(output))


def _read_output(content: str, calls: dict[str, Call]) -> None:
    head, _, body = content.partition("\n")
    match = _TOOL_LINE.match(head) if head.startswith("[tool ") else None
    if match is None:
        return
    call = calls.get(match.group(2) or "")
    if call is not None:
        _answer(call, body)


def _answer(call: Call, output: str) -> None:
    text, exit_code = _unwrapped(output[: _OUTPUT_SCAN * 2])
    call.output = text[:_OUTPUT_SCAN]
    call.answered = True
    first = next((line.strip() for line in call.output.splitlines() if line.strip()), "")
    call.failed = bool(_FAILING.search(first)) or bool(exit_code)


def _unwrapped(output: str) -> tuple[str, int]:
    """A Codex output `{"output": "...", "metadata": {"exit_code": 1}}` as its text and exit
    code; Gemini CLI's `Output: ` prefix dropped; anything else as it is (exit code 0)."""
    stripped = output.lstrip()
    if stripped.startswith('{"output"'):
        given = _json(stripped)
        if isinstance(given.get("output"), str):
            metadata = given.get("metadata") if isinstance(given.get("metadata"), dict) else {}
            code = metadata.get("exit_code")
            return given["output"], code if isinstance(code, int) else 0
    return stripped.removeprefix("Output: "), 0


def changed_names(path: str, calls: list[Call], limit: int = 3) -> list[str]:
    """The names the edits of `path` changed: in the new text and not the old (added or
    renamed), then in the old and not the new (removed); for a new file, the first it names."""
    added: list[str] = []
    removed: list[str] = []
    stem = path.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    for call in calls:
        for old, new in _edit_texts(call, path):
            before, after = identifiers(old), identifiers(new)
            added.extend(n for n in after if n not in before)
            removed.extend(n for n in before if n not in after)
            if not added and not removed and new:
                added.extend(after[:2])  # the same names, rewritten: the ones it touched
    names = [n for n in dict.fromkeys([*added, *removed]) if n != stem]
    return names[:limit]


def _edit_texts(call: Call, path: str) -> list[tuple[str, str]]:
    given = call.input
    pairs: list[tuple[str, str]] = []
    old = given.get("old_string", given.get("oldString", ""))
    new = given.get(
        "new_string", given.get("newString", given.get("content", given.get("new_source", "")))
    )
    if isinstance(old, str) and isinstance(new, str) and (old or new):
        pairs.append((old, new))
    for edit in given.get("edits") or []:
        if isinstance(edit, dict):
            pairs.append((str(edit.get("old_string", "")), str(edit.get("new_string", ""))))
    for value in given.values():
        if isinstance(value, str) and "*** " in value:
            pairs.extend(_patch_pairs(value, path))
    return pairs


def _patch_pairs(patch: str, path: str) -> list[tuple[str, str]]:
    """The removed and added lines an apply_patch body gives `path`."""
    old, new, inside = [], [], False
    for line in patch.splitlines():
        if line.startswith("*** "):
            named = line.split(": ", 1)[-1].strip()
            inside = bool(named) and (path.endswith(named) or named.endswith(path))
        elif inside and line.startswith("-"):
            old.append(line[1:])
        elif inside and line.startswith("+"):
            new.append(line[1:])
    return [("\n".join(old), "\n".join(new))] if old or new else []


def error_key(output: str) -> str:
    """An error's key phrase: from the line that names the error (`TypeError: x is not a
    function`), else the output's first line (two when the first is short), tags removed,
    at most a short line; "" when it says no more than that something failed."""
    text = re.sub(r"</?tool_use_error>", "", output)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines[:60]:
        named = _ERROR_NAME.search(line)
        if named:
            return _clip(line[named.start() :])
    if not lines:
        return ""
    first = lines[0] if len(lines[0]) >= 12 or len(lines) == 1 else f"{lines[0]} {lines[1]}"
    return _clip(first) if len(first.split()) >= 2 else ""  # a bare "Error" says nothing


def is_tool_mechanics(output: str) -> bool:
    """A failure of the agent's tool use rather than of the work (an edit whose text was not
    found, a file not read first, a call the user refused)."""
    return bool(_MECHANICS.search(output[:400]))


def error_name(key: str) -> str:
    """The error's name in a key phrase (`TypeError`, `HTTP 404`), or ""."""
    named = _ERROR_NAME.search(key)
    return named.group(0) if named else ""


def _clip(text: str) -> str:
    text = " ".join(text.split()).replace("`", "'")
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS].rsplit(" ", 1)[0] + "…"


def _json(raw: str | None) -> dict:
    if not raw or not raw.startswith("{"):
        return {}
    try:
        given = json.loads(raw)
    except ValueError:
        return {}
    return given if isinstance(given, dict) else {}
