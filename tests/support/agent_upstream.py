"""A Responses API upstream that answers like a model driving an agent CLI (Codex, OpenCode),
for the end-to-end runs of scripts/responses_clis.py and the tests that replay what the
real CLIs sent.

The user's prompt is the script: each line `RUN: <command>`, `PATCH: <path> <text>` or
`TOOL: <name> <json arguments>` is one step. After the newest user message, the number of
tool outputs already in `input` says which step is next; each step is answered with a
reasoning item (encrypted content the client must send back byte-exact) and the call, in
the tool shape the client declared:

- a shell command: `exec_command {"cmd"}` (Codex), `shell {"command": [...]}`, or
  `bash {"command", "description"}` (OpenCode);
- a patch: Codex's freeform `apply_patch` (a `custom_tool_call` whose input is the patch
  grammar) or its function form, OpenCode's `apply_patch {"patchText"}`, or `write
  {"filePath", "content"}`;
- a named tool (an MCP tool, found by name or by suffix, inside `namespace` tools too).

When every step has run, the answer is text naming the outputs' count. A request whose
newest user text is Codex's "CONTEXT CHECKPOINT COMPACTION" prompt is answered with a
checkpoint summary; an input ending with `{"type": "compaction_trigger"}` with exactly one
`compaction` item. Usage reports the request's size (4 bytes a token), so a client's own
auto-compaction sees the real growth.
"""

from __future__ import annotations

import hashlib
import json
import re

from tests.support.fake_http import RecordedRequest, Scripted
from tests.support.fake_responses_api import (
    compaction_item,
    custom_tool_call_item,
    function_call_item,
    message_item,
    reasoning_item,
    responses_stream,
)

COMPACTION_PROMPT = "CONTEXT CHECKPOINT COMPACTION"
# OpenCode wraps the prompt in literal quotes: a step's line may begin or end with one.
_STEP = re.compile(r"^[\s\"]*(RUN|PATCH|TOOL):\s*(.+?)[\s\"]*$", re.MULTILINE)
_OUTPUTS = {
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "mcp_call_output",
}


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _turn(items: list) -> tuple[str, int]:
    """(the newest user text, the tool outputs after it)."""
    outputs = 0
    for item in reversed(items):
        if not isinstance(item, dict):
            continue
        if item.get("type") in _OUTPUTS:
            outputs += 1
        elif item.get("role") == "user" and item.get("type", "message") == "message":
            text = _text(item.get("content"))
            if not text.lstrip().startswith("<environment_context>"):
                return text, outputs
    return "", outputs


def _tools(body: dict) -> dict[str, dict]:
    """Every tool the client declared, by name (a namespace's tools too)."""
    found: dict[str, dict] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("name"):
            found[tool["name"]] = tool
        for inner in tool.get("tools") or []:
            if isinstance(inner, dict) and inner.get("name"):
                found[inner["name"]] = {**inner, "namespace": tool.get("name")}
    return found


def _shell(tools: dict, command: str) -> dict:
    if "exec_command" in tools:
        return function_call_item("exec_command", {"cmd": command})
    if "shell" in tools:
        return function_call_item("shell", {"command": ["bash", "-lc", command]})
    if "bash" in tools:
        return function_call_item("bash", {"command": command, "description": "run a command"})
    return message_item(f"no shell tool among {sorted(tools)}")


def _patch(tools: dict, spec: str) -> dict:
    path, _, text = spec.partition(" ")
    tool = tools.get("apply_patch")
    patch = f"*** Begin Patch\n*** Add File: {path}\n+{text}\n*** End Patch\n"
    if tool is not None and tool.get("type") == "custom":
        return custom_tool_call_item("apply_patch", patch)
    if tool is not None:
        properties = (tool.get("parameters") or {}).get("properties") or {}
        field = "patchText" if "patchText" in properties else "input"  # OpenCode's, Codex's
        return function_call_item("apply_patch", {field: patch})
    if "write" in tools:
        return function_call_item("write", {"filePath": path, "content": text + "\n"})
    return message_item(f"no patch tool among {sorted(tools)}")


def _named(tools: dict, spec: str) -> dict:
    name, _, arguments = spec.partition(" ")
    match = name if name in tools else next((t for t in tools if t.endswith(name)), None)
    if match is None:
        return message_item(f"no tool {name} among {sorted(tools)}")
    item = function_call_item(match, arguments.strip() or "{}")
    if tools[match].get("namespace"):
        item["namespace"] = tools[match]["namespace"]
    return item


def answer(request: RecordedRequest) -> Scripted:
    body = request.body
    items = body.get("input") if isinstance(body.get("input"), list) else []
    tokens = max(1, len(request.raw) // 4)
    usage = {"input_tokens": tokens, "output_tokens": 40, "model": body.get("model", "")}
    if items and isinstance(items[-1], dict) and items[-1].get("type") == "compaction_trigger":
        return responses_stream([compaction_item(f"cmp-of-{len(items)}-items")], **usage)
    prompt, done = _turn(items)
    if COMPACTION_PROMPT in prompt:
        summary = f"Checkpoint: {len(items)} items so far; the work continues."
        return responses_stream([message_item(summary)], **usage)
    steps = _STEP.findall(prompt)
    thought = reasoning_item(f"step {done + 1}", encrypted_content=f"enc-step-{done + 1}==")
    if done < len(steps):
        kind, spec = steps[done]
        tools = _tools(body)
        call = {"RUN": _shell, "PATCH": _patch, "TOOL": _named}[kind](tools, spec)
        if "call_id" in call:  # the same request is answered with the same call, every run
            digest = hashlib.sha256(prompt.encode()).hexdigest()[:10]
            call["call_id"] = f"call_{digest}_{done + 1}"
        return responses_stream([thought, call], **usage)
    text = f"done: {done} tool outputs seen" if steps else "hello from the scripted upstream"
    return responses_stream([thought, message_item(text)], **usage)


def dumps(request: RecordedRequest) -> dict:
    """A recorded request as test data: method, path, the headers a client chose, the body."""
    return {
        "method": request.method,
        "path": request.path,
        "headers": {
            k: v for k, v in request.headers.items() if k not in ("host", "content-length")
        },
        "body": json.loads(request.raw) if request.raw else None,
    }
