"""Past the budget, a Claude Code session through `/anthropic` stays cacheable (issue 41,
item 5; dropin/forward_context.py): the messages sent grow by appending between rare cuts,
the summaries' block carries a cache mark, a message sent as blocks and then as a string
is the same prefix, and in steady state at least 0.85 of the input is read from the
provider's cache (tests/support/fake_prompt_cache.py keeps it by the provider's rule).

The session is written here in Claude Code's shapes (tests/dropin/data holds the real
CLI's requests): a system prompt with two marks, tools, the newest message as blocks with
`cache_control` and, in the next request, the string it was; tool loops whose assistant
turns carry thinking with signatures."""

from __future__ import annotations

import json

import httpx
import pytest

from dropin import services
from dropin.models import Thread
from dropin.services import Replaced
from dropin.wires import anthropic as wire
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    anthropic_stream,
    text_block,
    thinking_block,
    tool_use_block,
)

MARK = {"type": "ephemeral"}
SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli;"},
    {"type": "text", "text": "You are a Claude agent.", "cache_control": MARK},
    {
        "type": "text",
        "text": "You help with software engineering tasks. Cite the file for every claim. " * 110,
        "cache_control": MARK,
    },
]
TOOLS = [
    {
        "name": "Bash",
        "description": "Executes a bash command and returns its output. " * 20,
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
    {
        "name": "Read",
        "description": "Reads a file from the local filesystem. " * 20,
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
    },
]
WINDOW = 20000  # the unlisted model's: budget 20,000 - 10,000 (half) - 1,500 margin
SESSION = "d21d1ecc-0000-4e57-bc8b-632ba42ed47a"
HEADERS = {
    "anthropic-version": "2023-06-01",
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    "content-type": "application/json",
    "x-api-key": "sk-ant-the-clients-own",
}


def session_script(prompts: int) -> list[tuple[str, list]]:
    """(kind, content) in order: a typed prompt, then tool loops and an answer for each."""
    script: list[tuple[str, list]] = []
    for n in range(prompts):
        script.append(("prompt", [f"Task {n}: look at module_{n}.py and tell me what it does."]))
        for step in range(2):
            call = tool_use_block(
                "Read" if step else "Bash",
                {"file_path": f"/src/module_{n}.py"} if step else {"command": f"ls /src/{n}"},
                id=f"toolu_{n:03d}_{step}",
            )
            script.append(
                ("call", [thinking_block(f"Step {step} of task {n}.", f"sig-{n}-{step}"), call])
            )
            output = (
                f"line {n}.{step}: def handler_{n}_{step}(request): return route(request)\n" * 30
            )
            script.append(
                ("result", [{"type": "tool_result", "tool_use_id": call["id"], "content": output}])
            )
        script.append(
            (
                "answer",
                [
                    thinking_block(f"Done with {n}.", f"sig-{n}"),
                    text_block(f"module_{n}.py routes requests to handler_{n}_0."),
                ],
            )
        )
    return script  # fmt: skip


def claude_code_bodies(script):
    """Each request Claude Code sends along the script, with the answer it gets: the
    history with its breakpoint on the last block of the last message (a typed prompt
    goes as blocks while it is the newest message, as its string afterwards)."""
    history: list[dict] = []
    for kind, content in script:
        if kind in ("call", "answer"):
            last = dict(history[-1])
            blocks = last["content"]
            blocks = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks
            last["content"] = blocks[:-1] + [{**blocks[-1], "cache_control": MARK}]
            body = {
                "model": "claude-opus-4-8",
                "messages": history[:-1] + [last],
                "system": SYSTEM,
                "tools": TOOLS,
                "metadata": {"user_id": json.dumps({"device_id": "0", "session_id": SESSION})},
                "max_tokens": 64000,
                "thinking": {"type": "adaptive"},
                "stream": True,
            }
            yield body, content
            history.append({"role": "assistant", "content": content})
        elif kind == "prompt":
            history.append({"role": "user", "content": content[0]})
        else:
            history.append({"role": "user", "content": content})


@pytest.fixture
def cached_upstream(monkeypatch, settings):
    with FakeMessagesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # summaries made offline
        settings.LCM_DROPIN_UNLISTED_CONTEXT_LIMIT = WINDOW
        settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
        yield api


def replay(live_server, token: str, upstream: FakeMessagesAPI, prompts: int) -> list[dict]:
    """Every request of the script through the served endpoint: per request, the body the
    upstream received, its cache usage, and the answer's headers."""
    runs = []
    with httpx.Client(timeout=60) as client:
        for body, answer in claude_code_bodies(session_script(prompts)):
            upstream.enqueue(anthropic_stream(answer))
            response = client.post(
                f"{live_server.url}/anthropic/v1/messages?beta=true",
                content=json.dumps(body).encode(),
                headers={**HEADERS, "X-LCM-Token": token},
            )
            assert response.status_code == 200, response.content
            runs.append(
                {
                    "sent": upstream.requests[-1].body,
                    "usage": upstream.cache_reports[-1],
                    "compacted": response.headers["X-LCM-Compacted"] == "true",
                    "forked": response.headers["X-LCM-Forked"] == "true",
                }
            )
    return runs


def normalised(messages: list[dict]) -> list:
    """What the provider's rule compares: a string is its one text block; marks aside."""
    out = []
    for message in messages:
        content = message["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out.append(
            [
                message["role"],
                [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks],
            ]
        )
    return out


def is_summary(message: dict) -> bool:
    content = message["content"]
    return (
        isinstance(content, list)
        and content[0].get("type") == "text"
        and content[0]["text"].startswith(services.SUMMARIES_HEADING)
    )


def test_a_claude_code_session_past_its_budget_reads_085_of_its_input_from_the_cache(
    cached_upstream, live_server, caller
):
    runs = replay(live_server, caller[1], cached_upstream, prompts=14)

    first = next(i for i, run in enumerate(runs) if run["compacted"])
    steady = [run["usage"] for run in runs[first + 1 :]]
    assert len(steady) >= 20
    read = sum(u["cache_read_input_tokens"] for u in steady)
    total = sum(sum(u.values()) for u in steady)
    assert read / total >= 0.85, (read, total)
    # The summaries' block is a breakpoint of its own (Claude Code's three marks + ours).
    summarised = [run["sent"] for run in runs if is_summary(run["sent"]["messages"][0])]
    assert summarised, "compaction made no summary"
    for sent in summarised:
        assert "cache_control" in sent["messages"][0]["content"][-1]
        marks = json.dumps(sent).count('"cache_control"')
        assert marks == 4


def test_past_the_budget_the_messages_sent_only_grow_between_rare_cuts(
    cached_upstream, live_server, caller
):
    runs = replay(live_server, caller[1], cached_upstream, prompts=12)

    assert not any(run["forked"] for run in runs)  # blocks, then a string: the same message
    assert Thread.objects.exclude(key__contains=":side:").count() == 1
    compacted = [run for run in runs if run["compacted"]]
    assert len(compacted) >= 15
    cuts = 0
    for before, after in zip(compacted, compacted[1:], strict=False):
        previous = normalised(before["sent"]["messages"])
        current = normalised(after["sent"]["messages"])
        if current[: len(previous)] == previous:
            # Appended: the provider reads all the previous request had (blocks or string).
            written = sum(before["usage"].values()) - before["usage"]["input_tokens"]
            assert after["usage"]["cache_read_input_tokens"] >= written
        else:
            cuts += 1
    assert cuts <= 3, cuts  # the low-water mark: a cut every several requests, not each one
    for run in compacted:
        blocks = [
            b
            for m in run["sent"]["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
        ]
        calls = {b["id"] for b in blocks if b["type"] == "tool_use"}
        assert {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"} <= calls
        # The current tool loop's assistant turn goes back as Claude Code sent it.
        assert run["sent"]["messages"][-2]["content"][0]["type"] == "thinking"


def test_the_summaries_mark_never_makes_a_fifth_breakpoint():
    body = {
        "model": "m",
        "system": [{"type": "text", "text": "s", "cache_control": MARK}],
        "tools": [{"name": "t", "input_schema": {}, "cache_control": MARK}],
        "messages": [
            {"role": "user", "content": "old"},
            {"role": "assistant", "content": [{"type": "text", "text": "a", "cache_control": MARK}]},
            {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": MARK}]},
        ],
    }  # fmt: skip
    replaced = Replaced(("<summary>one</summary>", "<summary>two</summary>"), 1, 10)

    full = json.loads(wire.forward_body(body, b"", model_id="m", replaced=replaced))
    summary = full["messages"][0]["content"]
    assert [("cache_control" in block) for block in summary] == [False, False]
    assert json.dumps(full).count('"cache_control"') == 4

    body["messages"][1]["content"][0].pop("cache_control")  # three marks: ours is the fourth
    marked = json.loads(wire.forward_body(body, b"", model_id="m", replaced=replaced))
    summary = marked["messages"][0]["content"]
    assert summary[0]["text"] == f"{services.SUMMARIES_HEADING}\n<summary>one</summary>"
    assert summary[1] == {"type": "text", "text": "<summary>two</summary>", "cache_control": MARK}
    assert marked["messages"][1:] == body["messages"][1:]  # the client's own, unchanged


def test_a_message_as_blocks_or_as_a_string_is_the_same_message():
    as_blocks = {"type": "text", "text": "What did you just do?", "cache_control": MARK}
    first = wire.parse({"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": [as_blocks]}]})  # fmt: skip
    then = wire.parse({"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "What did you just do?"}]})  # fmt: skip
    assert services.chain("", first.messages) == services.chain("", then.messages)
