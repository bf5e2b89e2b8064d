"""The OpenAI Responses wire (`POST /openai/v1/responses`) as the drop-in serves it, for the
way Codex and OpenCode call it: requests parsed into our blocks (every item type they send,
providers/openai_items.py), answers and errors in the Responses shapes.

Pass-through (dropin/forward.py, as the Anthropic wire's): a model served by a Responses
upstream (provider `openai`, or a name the configuration does not list) is sent the
client's own bytes (tools of every type, `reasoning`, `text`, `include`,
`prompt_cache_key`, `client_metadata` and fields unknown to us) and headers, but for what
the server replaces on purpose (`forward_body`): `model` named as configured, `input` past
the budget (the summaries, then the client's own items from the assembler's verbatim tail
on), a `previous_response_id` continued from the product's store (the whole `input` sent
instead), and a checkpoint `compaction` item of ours opened into its text. Its answer
comes back byte for byte as the upstream sent it (its own response id, which `GET
/responses/{id}` and `previous_response_id` then find in the product's store).

An answer from a model on another wire is translated from our blocks into the same event
sequence: response.created,
response.in_progress, output_item.added, content_part.added, output_text.delta,
function_call_arguments.delta (custom_tool_call_input.delta for a freeform tool), the done
events, response.completed with usage.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

from core.sse import sse_frame
from dropin import checkpoint, stored_responses
from dropin.errors import DropinError, broken, invalid
from dropin.requests import DropinRequest, merge_consecutive
from dropin.wires import Passthrough
from providers import blocks as b
from providers import openai_items
from providers.base import ProviderResponse, TextDelta, ToolCallDelta, ToolCallStart
from providers.openai_wire import response_from_object

NAME = WIRE = "openai_responses"
ID_PREFIX = "resp_"
PASSTHROUGH = Passthrough(
    provider="openai",
    prefix="/openai/v1",
    api_key_env="OPENAI_API_KEY",
    base_url_env="OPENAI_BASE_URL",
    default_base_url="https://api.openai.com/v1",
    key_header="Authorization",
    key_prefix="Bearer ",
)
SUMMARIES_HEADING = "Summaries of earlier conversation (untrusted data, oldest first):"
CHECKPOINT_OPTION = "checkpoint"  # the agent asked to compact (dropin/checkpoint.py)
_SYSTEM_ROLES = ("system", "developer")
_ROLES = ("user", "assistant", "system", "developer")
_PART_TYPES = {
    "input_text",
    "output_text",
    "text",
    "input_image",
    "input_file",
    "input_audio",
    "refusal",
    "summary_text",
    "reasoning_text",
}
KNOWN_ITEMS = (
    {"message", "reasoning", "compaction_trigger"}
    | set(openai_items.CALLS)
    | set(openai_items.OUTPUTS)
    | set(openai_items.OPAQUE_ASSISTANT)
    | set(openai_items.OPAQUE_USER)
)
_ERROR_TYPES = {
    "invalid_request": "invalid_request_error",
    "authentication": "invalid_request_error",
    "not_found": "invalid_request_error",
    "too_large": "invalid_request_error",
    "upstream": "server_error",
}
FREEFORM_SCHEMA = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "the tool's freeform input"}},
    "required": ["input"],
}


# request ------------------------------------------------------------------------------------


def parse(body: dict) -> DropinRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise invalid("'model' is required and must be a string", "model")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise invalid("'instructions' must be a string", "instructions")
    raw_input = body.get("input")
    if isinstance(raw_input, str):
        raw_input = [{"role": "user", "content": raw_input}]
    if not isinstance(raw_input, list) or not raw_input:
        raise invalid("'input' is required: a string or a non-empty array of items", "input")
    system_parts, messages, trigger = _items(raw_input)
    asked = trigger or _checkpoint_prompt(messages)
    if asked and not trigger:
        messages = messages[:-1]  # the agent's compaction prompt: answered, not stored
    if not messages:
        raise invalid("'input' holds no user, assistant or tool item", "input")
    max_tokens = body.get("max_output_tokens")
    if max_tokens is not None and (
        not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1
    ):
        raise invalid("'max_output_tokens' must be a positive integer", "max_output_tokens")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid("'stream' must be a boolean", "stream")
    system = "\n\n".join(part for part in [instructions or "", *system_parts] if part)
    options = _options(body)
    if asked:
        options[CHECKPOINT_OPTION] = "trigger" if trigger else "prompt"
    return DropinRequest(
        wire=WIRE,
        model=model,
        system=system,
        messages=merge_consecutive(messages),
        tools=_tools(body.get("tools")),
        max_tokens=max_tokens,
        stream=stream,
        options=options,
        body=body,
    )


def _items(raw_input: list) -> tuple[list[str], list[dict], bool]:
    """(the leading system and developer texts, the other items as our messages, whether
    the input ends with a compaction trigger)."""
    system_parts: list[str] = []
    messages: list[dict] = []
    trigger = False
    for index, item in enumerate(raw_input):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise invalid(f"{where} must be an object", where)
        kind = item.get("type", "message")
        if kind not in KNOWN_ITEMS:
            raise invalid(
                f"{where}.type {kind!r} is not a Responses input item type", f"{where}.type"
            )
        if kind == "compaction_trigger":
            if index != len(raw_input) - 1:
                raise invalid(f"{where}: a compaction_trigger must be the last item", where)
            trigger = True
            continue
        if kind == "compaction" and checkpoint.decode_item(item.get("encrypted_content")):
            text = checkpoint.decode_item(item["encrypted_content"])
            messages.append({"role": "user", "blocks": [b.text(text)], "at": index})
            continue
        if kind == "message":
            role, blocks = _message(item, where)
            if role in _SYSTEM_ROLES and not messages:
                system_parts.append(b.rendered_text(blocks))
                continue
            role = "user" if role in _SYSTEM_ROLES else role
            messages.append({"role": role, "blocks": blocks, "at": index})
            continue
        _check_item(item, kind, where)
        role, blocks = openai_items.item_blocks(item)
        messages.append({"role": role, "blocks": blocks, "at": index})
    return system_parts, messages, trigger


def _checkpoint_prompt(messages: list[dict]) -> bool:
    """The newest item is the agent's own compaction prompt (Codex's on a custom provider)."""
    last = messages[-1] if messages else None
    return bool(
        last
        and last["role"] == "user"
        and checkpoint.PROMPT_MARK in b.rendered_text(last["blocks"])[:200]
    )


def _message(item: dict, where: str) -> tuple[str, list[dict]]:
    role = item.get("role")
    if role not in _ROLES:
        raise invalid(f"{where}.role must be one of {', '.join(_ROLES)}", f"{where}.role")
    content = item.get("content")
    if isinstance(content, str):
        return role, [b.text(content)]
    if not isinstance(content, list):
        raise invalid(f"{where}.content must be a string or an array of parts", f"{where}.content")
    out = []
    for index, part in enumerate(content):
        field = f"{where}.content[{index}]"
        if not isinstance(part, dict) or part.get("type") not in _PART_TYPES:
            kind = part.get("type") if isinstance(part, dict) else None
            raise invalid(f"{field}.type {kind!r} is not a content part type", f"{field}.type")
        if part["type"] in ("input_text", "output_text", "text") and not isinstance(
            part.get("text"), str
        ):
            raise invalid(f"{field}.text must be a string", f"{field}.text")
        out.append(openai_items.content_block(part))
    return role, out


def _check_item(item: dict, kind: str, where: str) -> None:
    """The fields an item cannot do without, by type."""
    required: tuple[tuple[str, type], ...] = ()
    if kind == "function_call":
        required = (("call_id", str), ("name", str), ("arguments", str))
    elif kind == "custom_tool_call":
        required = (("call_id", str), ("name", str), ("input", str))
    elif kind == "local_shell_call":
        required = (("call_id", str), ("action", dict))
    elif kind in openai_items.OUTPUTS:
        required = (("call_id", str),)
        output = item.get("output")
        if not isinstance(output, str | list):
            raise invalid(f"{where}.output must be a string or an array", f"{where}.output")
    elif kind == "reasoning":
        summary = item.get("summary", [])
        if not isinstance(summary, list):
            raise invalid(f"{where}.summary must be an array", f"{where}.summary")
    for name, expected in required:
        value = item.get(name)
        if not isinstance(value, expected) or (
            expected is str and name != "arguments" and not value
        ):
            raise invalid(f"{where}.{name} is required for a {kind} item", f"{where}.{name}")


def _options(body: dict) -> dict:
    options: dict = {}
    choice = body.get("tool_choice")
    if choice in ("auto", "none", "required"):
        options["tool_choice"] = {"required": "any"}.get(choice, choice)
    if "parallel_tool_calls" in body:
        options["parallel_tool_calls"] = bool(body["parallel_tool_calls"])
    return options


def _tools(tools) -> list[dict]:
    """Function and freeform tools (a namespace's too) as ours, for a model on another wire;
    server-side tools (web_search, tool_search, ...) go to a Responses upstream only."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise invalid("'tools' must be an array", "tools")
    out: list[dict] = []
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
            raise invalid(f"{where} must be an object with a type", where)
        inner = tool.get("tools") if tool["type"] == "namespace" else [tool]
        if not isinstance(inner, list):
            raise invalid(f"{where}.tools must be an array", f"{where}.tools")
        for one in inner:
            if not isinstance(one, dict) or one.get("type") not in ("function", "custom"):
                continue
            if not isinstance(one.get("name"), str) or not one["name"]:
                raise invalid(f"{where}: a {one.get('type')} tool needs a name", f"{where}.name")
            schema = one.get("parameters") if one["type"] == "function" else FREEFORM_SCHEMA
            out.append(
                {
                    "name": one["name"],
                    "description": str(one.get("description") or ""),
                    "input_schema": schema or {"type": "object", "properties": {}},
                }
            )
    return out


def resolve(body: dict, *, user) -> dict:
    """`previous_response_id` continued from the product's store (dropin/stored_responses.py)."""
    return stored_responses.resolve(body, user=user)


def remember(request: DropinRequest, *, conversation_id: int, answer: dict) -> None:
    from conversations.models import Conversation

    owner_id = Conversation.objects.values_list("owner_id", flat=True).get(pk=conversation_id)
    stored_responses.remember(
        request, conversation_id=conversation_id, owner_id=owner_id, answer=answer
    )


def session_key(request: DropinRequest, *, owner: int) -> str | None:
    """The conversation an agent's session names: its `prompt_cache_key` (Codex: the
    session id, also in its session-id header; OpenCode: its session id, absent on its
    title request, which is not part of the session). Per caller, so two users' equal keys
    never meet."""
    value = (request.body or {}).get("prompt_cache_key")
    if not isinstance(value, str) or not value.strip():
        return None
    return f"session:{owner}:{value.strip()}"[:200]


def freeform_tools(request: DropinRequest) -> set[str]:
    """The names of the freeform (`custom`) tools the client declared."""
    body = request.body or {}
    names = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            for one in tool.get("tools") or [tool]:
                if isinstance(one, dict) and one.get("type") == "custom":
                    names.add(one.get("name"))
    return names


# answer -------------------------------------------------------------------------------------


def output(request: DropinRequest, blocks: list[dict]) -> list[dict]:
    """Our answer's blocks as Responses output items, a call to a freeform tool as the
    `custom_tool_call` the client declared it as."""
    freeform = freeform_tools(request)
    items = []
    for item in openai_items.output_items(blocks):
        if item.get("type") == "function_call" and item.get("name") in freeform:
            arguments = openai_items.parse_arguments(item.get("arguments", ""))
            item = {
                "type": "custom_tool_call",
                "call_id": item["call_id"],
                "name": item["name"],
                "input": str(arguments.get("input", "")),
            }
        items.append(item)
    for position, item in enumerate(items):
        item.setdefault("id", f"{_ITEM_PREFIX.get(item.get('type'), 'item')}_{position}")
        if item.get("type") in ("message", "function_call", "custom_tool_call"):
            item.setdefault("status", "completed")
    return items


_ITEM_PREFIX = {
    "message": "msg",
    "function_call": "fc",
    "custom_tool_call": "ctc",
    "reasoning": "rs",
}


def usage(response: ProviderResponse) -> dict:
    spent = response.usage or {}
    prompt, completion = spent.get("input_tokens") or 0, spent.get("output_tokens") or 0
    cached = spent.get("cache_read_input_tokens") or 0
    if spent.get("cache_creation_input_tokens") or cached:
        # Anthropic counts cached tokens apart; the Responses wire counts them in.
        prompt += cached + (spent.get("cache_creation_input_tokens") or 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _status(response: ProviderResponse) -> tuple[str, dict | None]:
    outcome = response.outcome
    if outcome["status"] in ("completed", "paused"):
        return "completed", None
    if outcome["status"] == "incomplete":
        reason = outcome.get("reason")
        return "incomplete", {
            "reason": "max_output_tokens" if reason in ("max_tokens", "length") else reason
        }
    return "failed", None


def response_object(
    request: DropinRequest, answer_id: str, items: list[dict], status: str, **extra
) -> dict:
    body = request.body or {}
    return {
        "id": answer_id,
        "object": "response",
        "created_at": extra.pop("created_at", int(time.time())),
        "status": status,
        "error": extra.pop("error", None),
        "incomplete_details": extra.pop("incomplete_details", None),
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": request.model,
        "output": items,
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
        "store": bool(body.get("store", True)),
        "temperature": body.get("temperature", 1.0),
        "text": body.get("text") or {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": body.get("truncation", "disabled"),
        "usage": extra.pop("usage", None),
        "metadata": body.get("metadata") or {},
        **extra,
    }


def response_body(request: DropinRequest, response: ProviderResponse, answer_id: str) -> dict:
    status, details = _status(response)
    return response_object(
        request,
        answer_id,
        output(request, response.blocks),
        status,
        incomplete_details=details,
        usage=usage(response),
    )


class StreamWriter:
    """An answer from a model on another wire (or the product's checkpoint) as the
    Responses event sequence, built from our stream events (a Responses upstream's own
    stream is relayed as it came, dropin/forward.py)."""

    def __init__(self, request: DropinRequest, answer_id: str) -> None:
        self.request = request
        self.answer_id = answer_id
        self.created = int(time.time())
        self.final: dict | None = None  # the completed response object, as the client got it
        self.started = False
        self.sequence = 0
        self.open: dict | None = None  # the item being streamed (translated answers)
        self.items: list[dict] = []
        self.freeform = freeform_tools(request)

    def _emit(self, kind: str, **data) -> bytes:
        payload = {"type": kind, **data, "sequence_number": self.sequence}
        self.sequence += 1
        return sse_frame(json.dumps(payload, separators=(",", ":")), event=kind)

    def start(self) -> Iterator[bytes]:
        return iter(())  # response.created goes out with the first event

    def _begin(self) -> Iterator[bytes]:
        if self.started:
            return
        self.started = True
        snapshot = response_object(
            self.request, self.answer_id, [], "in_progress", created_at=self.created
        )
        yield self._emit("response.created", response=snapshot)
        yield self._emit("response.in_progress", response=snapshot)

    def event(self, event) -> Iterator[bytes]:
        yield from self._begin()
        if isinstance(event, TextDelta) and event.text:
            if self.open is None or self.open["type"] != "message":
                yield from self._close()
                yield from self._open(
                    {"type": "message", "role": "assistant", "status": "in_progress", "content": []}
                )
                yield self._emit(
                    "response.content_part.added",
                    **self._where(),
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": []},
                )
                self.open["text"] = ""
            self.open["text"] += event.text
            yield self._emit(
                "response.output_text.delta",
                **self._where(),
                content_index=0,
                delta=event.text,
                logprobs=[],
            )
        elif isinstance(event, ToolCallStart):
            yield from self._close()
            freeform = event.name in self.freeform
            item = {
                "type": "custom_tool_call" if freeform else "function_call",
                "status": "in_progress",
                "call_id": event.call_id,
                "name": event.name,
                ("input" if freeform else "arguments"): "",
            }
            yield from self._open(item)
            self.open["json"] = ""
        elif isinstance(event, ToolCallDelta) and self.open is not None and "json" in self.open:
            self.open["json"] += event.partial_json
            if self.open["type"] == "function_call":
                yield self._emit(
                    "response.function_call_arguments.delta",
                    **self._where(),
                    delta=event.partial_json,
                )

    def _where(self) -> dict:
        return {"item_id": self.open["id"], "output_index": len(self.items)}

    def _open(self, item: dict) -> Iterator[bytes]:
        item["id"] = f"{_ITEM_PREFIX.get(item['type'], 'item')}_{len(self.items)}"
        self.open = item
        public = {k: v for k, v in item.items() if k not in ("text", "json")}
        yield self._emit("response.output_item.added", output_index=len(self.items), item=public)

    def _close(self) -> Iterator[bytes]:
        item, self.open = self.open, None
        if item is None:
            return
        where = {"item_id": item["id"], "output_index": len(self.items)}
        if item["type"] == "message":
            text = item.pop("text", "")
            part = {"type": "output_text", "text": text, "annotations": []}
            yield self._emit(
                "response.output_text.done", **where, content_index=0, text=text, logprobs=[]
            )
            yield self._emit("response.content_part.done", **where, content_index=0, part=part)
            item["content"] = [part]
        else:
            arguments = item.pop("json", "")
            if item["type"] == "custom_tool_call":
                item["input"] = str(openai_items.parse_arguments(arguments).get("input", ""))
                yield self._emit(
                    "response.custom_tool_call_input.delta", **where, delta=item["input"]
                )
                yield self._emit(
                    "response.custom_tool_call_input.done", **where, input=item["input"]
                )
            else:
                item["arguments"] = arguments
                yield self._emit(
                    "response.function_call_arguments.done", **where, arguments=arguments
                )
        item["status"] = "completed"
        self.items.append(item)
        yield self._emit("response.output_item.done", output_index=len(self.items) - 1, item=item)

    def finish(self, response: ProviderResponse) -> Iterator[bytes]:
        if broken(response):
            yield from self._begin()
            yield from self.error(_failure(response))
            return
        yield from self._begin()
        yield from self._close()
        status, details = _status(response)
        if not self.items:  # items that came whole (a checkpoint's compaction item)
            for item in output(self.request, response.blocks):
                where = {"output_index": len(self.items)}
                yield self._emit("response.output_item.added", **where, item=item)
                self.items.append(item)
                yield self._emit("response.output_item.done", **where, item=item)
        items = self.items
        final = response_object(
            self.request,
            self.answer_id,
            items,
            status,
            created_at=self.created,
            incomplete_details=details,
            usage=usage(response),
        )
        kind = "response.completed" if status == "completed" else "response.incomplete"
        self.final = final if status == "completed" else None
        yield self._emit(kind, response=final)

    def remember(self, conversation_id: int) -> None:
        if self.final is not None:
            remember(self.request, conversation_id=conversation_id, answer=self.final)

    def error(self, error: DropinError) -> Iterator[bytes]:
        body = error_body(error)["error"]
        yield self._emit("error", code=body["code"], message=body["message"], param=body["param"])


def _failure(response: ProviderResponse) -> DropinError:
    return DropinError(
        502,
        "upstream",
        response.outcome.get("message") or "the upstream model failed",
        code=response.outcome.get("code") or "upstream_error",
    )


def error_body(error: DropinError) -> dict:
    return {
        "error": {
            "message": error.message,
            "type": _ERROR_TYPES.get(error.kind, "invalid_request_error"),
            "param": error.param,
            "code": error.code,
        }
    }


# pass-through -------------------------------------------------------------------------------


def forward_body(body: dict, raw: bytes, *, model_id: str, replaced, mark: bool = False) -> bytes:
    """The bytes sent upstream: the client's own while nothing is replaced; else its body
    (every field in order, untouched) with the model's configured id and `input` replaced
    where the server means to: past the budget, the leading system and developer items,
    one user message holding the summaries, then the client's own items from
    `replaced.first` on; after a `previous_response_id` (which the upstream is not sent:
    the product is the store), the whole history; a checkpoint `compaction` item of ours
    as the text it holds (an upstream could not decrypt it). `mark` is for explicit cache
    marks (Anthropic's): a Responses upstream caches prefixes by itself."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    opened = [_ours_opened(item) for item in items]
    ours = any(new is not old for new, old in zip(opened, items, strict=True))
    continued = "previous_response_id" in body
    if replaced is None and not ours and not continued and body.get("model") == model_id:
        return raw
    sent = dict(body)
    sent["model"] = model_id
    sent.pop("previous_response_id", None)
    if replaced is not None:
        opened = [
            *_leading_system(opened),
            *summary_items(replaced.summaries),
            *_without_cut_outputs(opened[replaced.first :]),
        ]
    if replaced is not None or ours or continued:
        sent["input"] = opened
    return json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode()


def _ours_opened(item):
    """A `compaction` item the product made, as the checkpoint text it holds."""
    if isinstance(item, dict) and item.get("type") == "compaction":
        text = checkpoint.decode_item(item.get("encrypted_content"))
        if text is not None:
            return {"type": "message", "role": "user", "content": [_input_text(text)]}
    return item


def _without_cut_outputs(items: list) -> list:
    """The tail from the cut, without the tool outputs it begins with (a Codex user turn
    may follow a call's output directly: stored as one message, cut before both; the
    upstream refuses an output whose call it is not sent)."""
    start = 0
    while (
        start < len(items) - 1
        and isinstance(items[start], dict)
        and items[start].get("type") in openai_items.OUTPUTS
    ):
        start += 1
    return items[start:]


def _leading_system(items: list) -> list:
    """The system and developer messages the input begins with (the agent's prompt)."""
    lead = []
    for item in items:
        if not (
            isinstance(item, dict)
            and item.get("type", "message") == "message"
            and item.get("role") in _SYSTEM_ROLES
        ):
            break
        lead.append(item)
    return lead


def summary_items(summaries) -> list[dict]:
    if not summaries:
        return []
    text = SUMMARIES_HEADING + "\n" + "\n\n".join(summaries)
    return [{"type": "message", "role": "user", "content": [_input_text(text)]}]


def _input_text(text: str) -> dict:
    return {"type": "input_text", "text": text}


def answer_from_body(spec, raw: dict) -> ProviderResponse | None:
    """A whole passed-through answer read (None when the body is not a response object)."""
    if raw.get("object") != "response":
        return None
    return response_from_object(spec, {}, raw)
