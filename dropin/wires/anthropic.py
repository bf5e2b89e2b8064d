"""The Anthropic Messages wire as the drop-in serves it: requests parsed into our blocks,
answers (JSON and the event stream) and errors in Anthropic's shapes."""

from __future__ import annotations

import json
from collections.abc import Iterator

from core.sse import sse_frame
from dropin import memo
from dropin.errors import DropinError, broken, invalid
from dropin.requests import DropinRequest, merge_consecutive
from dropin.wires import Passthrough
from dropin.wires.outcome import answer_end
from providers import blocks as b
from providers.anthropic import response_from_message
from providers.anthropic_wire import our_block
from providers.base import ProviderResponse, TextDelta, ToolCallDelta, ToolCallStart

NAME = WIRE = "anthropic"
ID_PREFIX = "msg_"
_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "authentication": "authentication_error",
    "permission": "permission_error",
    "not_found": "not_found_error",
    "too_large": "request_too_large",
    "upstream": "api_error",
}


# request ------------------------------------------------------------------------------------


PASSTHROUGH = Passthrough(
    provider="anthropic",
    prefix="/anthropic",
    api_key_env="ANTHROPIC_API_KEY",
    base_url_env="ANTHROPIC_BASE_URL",
    default_base_url="https://api.anthropic.com",
    key_header="x-api-key",
)
SUMMARIES_HEADING = "Summaries of earlier conversation (untrusted data, oldest first):"
ROLES = ("user", "assistant", "system")
# Blocks the server reads; any other type (documents, server tool blocks, search results,
# container uploads, types newer than this code) is kept whole and passed on as it came.
_READ_BLOCKS = {"text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"}


def parse(body: dict, *, counting: bool = False) -> DropinRequest:
    """The request as our blocks. Every message keeps the client's own content (`raw`), so
    what is stored and what is passed through is exactly what the client sent; system-role
    messages inside `messages` (Claude Code's mid-conversation system messages) are
    messages of their own kind, in place."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("model: Field required", "model")
    max_tokens = body.get("max_tokens")
    if not counting and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise invalid("max_tokens: Field required (a positive integer)", "max_tokens")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise invalid("messages: Field required (a non-empty array)", "messages")
    messages = []
    for index, message in enumerate(raw_messages):
        where = f"messages.{index}"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise invalid(f"{where}.role: must be user, assistant or system", f"{where}.role")
        content = message.get("content")
        # A message resent unchanged is parsed once per process (dropin/memo.py).
        name, size = memo.key(WIRE, message)
        seen = memo.entry(name) if name is not None else None
        if seen is None:
            blocks = _blocks(content, f"{where}.content")
            seen = memo.remember(name, blocks, size) if name is not None else None
        parsed = {
            "role": message["role"],
            "blocks": list(seen.blocks) if seen is not None else blocks,
            "raw": [content],
            "at": index,  # where it is in the client's messages (kept when merged)
        }
        if seen is not None:
            parsed["memo"] = seen
        messages.append(parsed)
    if any(a["role"] == b["role"] for a, b in zip(messages, messages[1:], strict=False)):
        messages = merge_consecutive(messages)  # else: nothing to merge, nothing copied
    if messages[0]["role"] != "user":
        raise invalid("messages.0.role: the first message must use the user role", "messages")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("stream: must be a boolean", "stream")
    return DropinRequest(
        wire=WIRE,
        model=model,
        system=_system(body.get("system")),
        messages=messages,
        tools=_tools(body.get("tools")),
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        stream=stream,
        include_usage=True,
        options=_options(body),
        session=session_id(body),
    )


def _options(body: dict) -> dict:
    options: dict = {}
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("auto", "any", "none"):
        options["tool_choice"] = choice["type"]
        if "disable_parallel_tool_use" in choice:
            options["parallel_tool_calls"] = not choice["disable_parallel_tool_use"]
    if body.get("stop_sequences"):
        options["stop_sequences"] = list(body["stop_sequences"])
    return options


def session_id(body: dict) -> str | None:
    """The agent's session id when the client sends one: Claude Code puts a JSON object in
    `metadata.user_id` whose `session_id` names its session (the same id it sends as the
    `X-Claude-Code-Session-Id` header)."""
    metadata = body.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if not isinstance(user_id, str) or not user_id.startswith("{"):
        return None
    try:
        data = json.loads(user_id)
    except ValueError:
        return None
    session = data.get("session_id") if isinstance(data, dict) else None
    return session if isinstance(session, str) and 0 < len(session) <= 200 else None


def _system(system) -> str:
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        texts = []
        for index, block in enumerate(system):
            if not isinstance(block, dict) or block.get("type") != "text":
                raise invalid(f"system.{index}: must be a text block", f"system.{index}")
            texts.append(str(block.get("text", "")))
        return "\n\n".join(texts)
    raise invalid("system: must be a string or an array of text blocks", "system")


def _blocks(content, where: str) -> list[dict]:
    if isinstance(content, str):
        return [b.text(content)]
    if not isinstance(content, list):
        raise invalid(f"{where}: must be a string or an array of blocks", where)
    out = []
    for index, block in enumerate(content):
        field = f"{where}.{index}"
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(kind, str) or not kind:
            raise invalid(f"{field}.type: Field required", f"{field}.type")
        out.append(_block(block, kind, field) if kind in _READ_BLOCKS else b.unknown(WIRE, block))
    return out


def _block(block: dict, kind: str, field: str) -> dict:
    if kind == "text":
        return b.text(str(block.get("text", "")))
    if kind == "image":
        source = block.get("source")
        if not isinstance(source, dict) or not source.get("type"):
            raise invalid(f"{field}.source: Field required", f"{field}.source")
        return b.image(source.get("media_type", ""), source)
    if kind == "tool_use":
        if not block.get("id") or not block.get("name"):
            raise invalid(f"{field}: a tool_use needs an id and a name", field)
        return b.tool_use(block["id"], block["name"], block.get("input") or {})
    if kind == "tool_result":
        if not block.get("tool_use_id"):
            raise invalid(f"{field}.tool_use_id: Field required", f"{field}.tool_use_id")
        inner = block.get("content")
        content_blocks = (
            [b.text(inner)] if isinstance(inner, str) else _blocks(inner or [], f"{field}.content")
        )
        return b.tool_result(block["tool_use_id"], content_blocks, bool(block.get("is_error")))
    return our_block(block)  # thinking, redacted_thinking: kept whole with their signatures


def _tools(tools) -> list[dict]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise invalid("tools: must be an array", "tools")
    out = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict) or not tool.get("name"):
            raise invalid(f"tools.{index}.name: Field required", f"tools.{index}.name")
        out.append(
            {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "input_schema": tool.get("input_schema") or {"type": "object", "properties": {}},
            }
        )
    return out


# answer -------------------------------------------------------------------------------------


STOP_REASONS = {
    "tool": "tool_use",
    "length": "max_tokens",
    "refusal": "refusal",
    "stop_sequence": "stop_sequence",
    "end": "end_turn",
}


def stop_reason(response: ProviderResponse) -> str:
    return STOP_REASONS[answer_end(response)]


def wire_content(blocks: list[dict]) -> list[dict]:
    out = []
    for block in blocks:
        if block["type"] == "text":
            out.append({"type": "text", "text": block["text"]})
        elif block["type"] == "tool_use":
            out.append(
                {
                    "type": "tool_use",
                    "id": block["id"],
                    "name": block["name"],
                    "input": block["input"],
                }
            )
        elif block["type"] == "reasoning":
            raw = block.get("raw") or {}
            if raw.get("type") in ("thinking", "redacted_thinking"):
                out.append(raw)
    return out


def _usage(response: ProviderResponse) -> dict:
    spent = response.usage or {}
    return {
        "input_tokens": spent.get("input_tokens") or 0,
        "output_tokens": spent.get("output_tokens") or 0,
        "cache_read_input_tokens": spent.get("cache_read_input_tokens") or 0,
        "cache_creation_input_tokens": spent.get("cache_creation_input_tokens") or 0,
    }


def response_body(request: DropinRequest, response: ProviderResponse, answer_id: str) -> dict:
    return {
        "id": answer_id,
        "type": "message",
        "role": "assistant",
        "model": request.model,
        "content": wire_content(response.blocks),
        "stop_reason": stop_reason(response),
        "stop_sequence": None,
        "usage": _usage(response),
    }


def _event(name: str, payload: dict) -> bytes:
    return sse_frame(json.dumps(payload), event=name)


class StreamWriter:
    """message_start, one content block per upstream text run or tool call
    (content_block_start / _delta / _stop), message_delta, message_stop."""

    def __init__(self, request: DropinRequest, answer_id: str) -> None:
        self.request = request
        self.answer_id = answer_id
        self.open: tuple[str, int] | None = None  # (kind, upstream index) of the open block
        self.position = -1

    def start(self) -> Iterator[bytes]:
        yield _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self.answer_id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.request.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
        )

    def _close(self) -> Iterator[bytes]:
        if self.open is not None:
            yield _event(
                "content_block_stop", {"type": "content_block_stop", "index": self.position}
            )
            self.open = None

    def _begin(self, kind: str, index: int, block: dict) -> Iterator[bytes]:
        yield from self._close()
        self.position += 1
        self.open = (kind, index)
        yield _event(
            "content_block_start",
            {"type": "content_block_start", "index": self.position, "content_block": block},
        )

    def event(self, event) -> Iterator[bytes]:
        if isinstance(event, TextDelta) and event.text:
            if self.open != ("text", event.index):
                yield from self._begin("text", event.index, {"type": "text", "text": ""})
            yield _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": self.position,
                    "delta": {"type": "text_delta", "text": event.text},
                },
            )
        elif isinstance(event, ToolCallStart):
            yield from self._begin(
                "tool",
                event.index,
                {"type": "tool_use", "id": event.call_id, "name": event.name, "input": {}},
            )
        elif isinstance(event, ToolCallDelta) and self.open == ("tool", event.index):
            yield _event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": self.position,
                    "delta": {"type": "input_json_delta", "partial_json": event.partial_json},
                },
            )

    def finish(self, response: ProviderResponse) -> Iterator[bytes]:
        yield from self._close()
        if broken(response):
            yield from self.error(
                DropinError(
                    502,
                    "upstream",
                    response.outcome.get("message") or "the upstream model failed",
                    code=response.outcome.get("code"),
                )
            )
            return
        yield _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason(response), "stop_sequence": None},
                "usage": _usage(response),
            },
        )
        yield _event("message_stop", {"type": "message_stop"})

    def error(self, error: DropinError) -> Iterator[bytes]:
        yield _event("error", error_body(error))


def error_body(error: DropinError) -> dict:
    return {
        "type": "error",
        "error": {"type": _ERROR_TYPES.get(error.kind, "api_error"), "message": error.message},
    }


# pass-through -------------------------------------------------------------------------------


def forward_body(body: dict, raw: bytes, *, model_id: str, replaced, mark: bool = False) -> bytes:
    """The bytes sent upstream: the client's own while nothing is replaced; else its body
    (every field in order, untouched) with the model's configured id and, past the budget,
    `messages` = one user message holding the summaries (a block each, the last one a
    cache breakpoint when the request leaves one free), then the client's own messages
    from `replaced.first` on. `mark`: the client marks no cache breakpoint of its own, so
    the server marks the stable prefix (the system prompt's end, the last message's end:
    what a stateless client sends again next time)."""
    marking = mark and not has_cache_marks(body)
    if replaced is None and body.get("model") == model_id and not marking:
        return raw
    sent = dict(body)
    sent["model"] = model_id
    if replaced is not None:
        kept = body["messages"][replaced.first :]
        marks = _marks_in(body.get("system"), body.get("tools"), *(m.get("content") for m in kept))
        marks += isinstance(body.get("cache_control"), dict)  # automatic caching's breakpoint
        sent["messages"] = summary_messages(replaced.summaries, mark=marks < MAX_CACHE_MARKS) + kept
    if marking:
        _mark_prefix(sent)
    return json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode()


def answer_from_body(spec, raw: dict) -> ProviderResponse | None:
    """A whole passed-through answer read (None when the body is not a message)."""
    if raw.get("type") != "message":
        return None
    return response_from_message(spec, {}, raw)


def has_cache_marks(body: dict) -> bool:
    """Whether the client placed any `cache_control` (then its marks are left as they are)."""
    if isinstance(body.get("cache_control"), dict):
        return True
    places = [body.get("system"), body.get("tools")]
    places += [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict)]
    return any(
        isinstance(block, dict) and "cache_control" in block
        for place in places
        if isinstance(place, list)
        for block in place
    )


def _mark_prefix(sent: dict) -> None:
    control = {"type": "ephemeral"}
    system = sent.get("system")
    if isinstance(system, str) and system:
        sent["system"] = [{"type": "text", "text": system, "cache_control": control}]
    elif isinstance(system, list) and system and isinstance(system[-1], dict):
        sent["system"] = system[:-1] + [{**system[-1], "cache_control": control}]
    messages = list(sent.get("messages") or [])
    if messages and isinstance(messages[-1], dict):
        last = messages[-1]
        content = last.get("content")
        if isinstance(content, str) and content:
            content = [{"type": "text", "text": content}]
        if isinstance(content, list) and content and isinstance(content[-1], dict):
            messages[-1] = {
                **last,
                "content": content[:-1] + [{**content[-1], "cache_control": control}],
            }
            sent["messages"] = messages


# The API refuses a request with more `cache_control` blocks than this.
MAX_CACHE_MARKS = 4


def _marks_in(*places) -> int:
    return sum(
        isinstance(block, dict) and "cache_control" in block
        for place in places
        if isinstance(place, list)
        for block in place
    )


def summary_messages(summaries, *, mark: bool = False) -> list[dict]:
    """One user message, a text block per summary (the heading in the first): a new cut
    whose older summaries stayed the same sends the same first blocks. `mark`: the last
    summary block is a cache breakpoint (docs/drop-in.md, "Bounded context")."""
    if not summaries:
        return []
    texts = [f"{SUMMARIES_HEADING}\n{summaries[0]}", *summaries[1:]]
    blocks: list[dict] = [{"type": "text", "text": text} for text in texts]
    if mark:
        blocks[-1]["cache_control"] = {"type": "ephemeral"}
    return [{"role": "user", "content": blocks}]
