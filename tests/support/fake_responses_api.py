"""A local HTTP server that speaks the OpenAI Responses API (`POST /v1/responses`) for the
real `openai` SDK, JSON and streaming (server-sent events, byte for byte as documented:
`event: <type>` and `data: <json>` with a `sequence_number`).

    with FakeResponsesAPI() as api:
        api.enqueue(responses_rate_limited(retry_after=1), responses_text_stream("hi"))
        client = openai.OpenAI(api_key="test", base_url=api.base_url, max_retries=0)
        ...

`base_url` already ends in `/v1`, as the SDK expects. Scripting, recording, hangs and
shutdown work as in fake_messages_api (both sit on tests/support/fake_http.py). Like the
real API it answers 400 `invalid_request_error` to a body without `model` or `input`.

Builders (each returns a `Scripted`):

- `responses_text_stream("hello world", chunks=3)`: response.created,
  response.in_progress, response.output_item.added (message), response.content_part.added,
  3 response.output_text.delta, response.output_text.done, response.content_part.done,
  response.output_item.done, response.completed (with usage).
- `responses_function_call_stream(name, arguments, call_id=None, text=None, chunks=3)`:
  optional message, then a function_call item whose arguments arrive as
  response.function_call_arguments.delta pieces.
- `responses_stream(output=[items], status="completed", incomplete_reason=None,
  error=None, chunks=3, ...)`: any output items (`message_item(text)`,
  `function_call_item(name, arguments)`, `reasoning_item(summary, encrypted_content)`,
  or unknown item types sent as they are); `status="incomplete"` ends with
  response.incomplete (incomplete_details.reason), `status="failed"` with response.failed
  (`error={"code", "message"}`).
  `custom_tool_call_item(name, input)` (a freeform tool such as Codex's apply_patch,
  streamed as response.custom_tool_call_input.delta), `reasoning_item` streams its summary
  as response.reasoning_summary_part/text events, `compaction_item(encrypted_content)`.
- `FakeResponsesAPI(respond=function)`: every request answered by `function(request)`
  instead of the queue (tests/support/agent_upstream.py answers like a model driving an
  agent CLI).
- `responses_error_event_stream(code="server_error", message=..., text="partial ")`:
  some text, then an `error` event (an error mid-stream).
- keyword arguments of every stream builder: `model`, `input_tokens`, `output_tokens`,
  `chunk_delay` (a slow stream), `drop_after` (close the socket after that many events),
  `unknown_event` (an event type the SDK does not know, sent after response.created).
- JSON answers: `responses_object(text | output=[...], status=...)` (non-streaming),
  `responses_error(status, type, code, message, headers)`, `responses_rate_limited(
  retry_after)`, `responses_overloaded()` (529), `responses_server_error(status)`,
  `responses_auth_error()`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time

from tests.support.fake_http import SSE, FakeAPI, RecordedRequest, Scripted, next_id
from tests.support.fake_prompt_cache import OpenAIPromptCache

__all__ = ["FakeResponsesAPI", "RecordedRequest", "SSE", "Scripted"]


def _chunks(text: str, parts: int) -> list[str]:
    parts = max(1, parts)
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# Output items ------------------------------------------------------------------------------


def message_item(text: str, id: str | None = None) -> dict:
    return {
        "id": id or f"msg_fake{next_id():06d}",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_item(
    name: str, arguments: dict | str, call_id: str | None = None, id: str | None = None
) -> dict:
    return {
        "id": id or f"fc_fake{next_id():06d}",
        "type": "function_call",
        "status": "completed",
        "call_id": call_id or f"call_fake{next_id():06d}",
        "name": name,
        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
    }


def reasoning_item(summary: str = "thought about it", encrypted_content: str = "enc-fake") -> dict:
    return {
        "id": f"rs_fake{next_id():06d}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
        "encrypted_content": encrypted_content,
    }


def custom_tool_call_item(name: str, input: str, call_id: str | None = None) -> dict:
    """A freeform tool's call (Codex's apply_patch): its input is plain text, not JSON."""
    return {
        "id": f"ctc_fake{next_id():06d}",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": call_id or f"call_fake{next_id():06d}",
        "name": name,
        "input": input,
    }


def compaction_item(encrypted_content: str = "cmp-fake") -> dict:
    """The one output item of a remote compaction (a `compaction_trigger` request)."""
    return {
        "id": f"cmp_fake{next_id():06d}",
        "type": "compaction",
        "encrypted_content": encrypted_content,
    }


def _response_object(
    output: list[dict],
    *,
    status: str,
    model: str,
    input_tokens: int,
    output_tokens: int,
    incomplete_reason: str | None = None,
    error: dict | None = None,
    id: str | None = None,
) -> dict:
    return {
        "id": id or f"resp_fake{next_id():06d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": error,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "instructions": None,
        "max_output_tokens": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": False,
        "previous_response_id": None,
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None
        if status == "in_progress"
        else {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
        "metadata": {},
    }


# Streams -----------------------------------------------------------------------------------


def responses_stream_events(
    output: list[dict],
    *,
    status: str = "completed",
    incomplete_reason: str | None = None,
    error: dict | None = None,
    error_event: dict | None = None,
    model: str = "gpt-fake-1",
    input_tokens: int = 100,
    output_tokens: int = 20,
    chunks: int = 3,
    unknown_event: str | None = None,
) -> tuple[SSE, ...]:
    response_id = f"resp_fake{next_id():06d}"
    sequence = iter(range(10_000))
    events: list[SSE] = []

    def emit(kind: str, **data) -> None:
        events.append(SSE(kind, {"type": kind, **data, "sequence_number": next(sequence)}))

    def snapshot(state: str, items: list[dict]) -> dict:
        return _response_object(
            items,
            status=state,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            incomplete_reason=incomplete_reason if state == "incomplete" else None,
            error=error if state == "failed" else None,
            id=response_id,
        )

    emit("response.created", response=snapshot("in_progress", []))
    if unknown_event:
        emit(unknown_event, detail="a future event")
    emit("response.in_progress", response=snapshot("in_progress", []))
    for index, item in enumerate(output):
        _item_events(emit, index, item, chunks)
    if error_event is not None:
        emit("error", code=error_event.get("code"), message=error_event.get("message"), param=None)
        return tuple(events)
    terminal = {"completed": "response.completed", "incomplete": "response.incomplete"}.get(
        status, "response.failed"
    )
    emit(terminal, response=snapshot(status, output))
    return tuple(events)


def _item_events(emit, index: int, item: dict, chunks: int) -> None:
    kind = item.get("type")
    if kind == "message":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        for content_index, part in enumerate(item["content"]):
            common = {"item_id": item["id"], "output_index": index, "content_index": content_index}
            emit(
                "response.content_part.added",
                **common,
                part={"type": "output_text", "text": "", "annotations": []},
            )
            for piece in _chunks(part["text"], chunks):
                emit("response.output_text.delta", **common, delta=piece, logprobs=[])
            emit("response.output_text.done", **common, text=part["text"], logprobs=[])
            emit("response.content_part.done", **common, part=part)
    elif kind == "function_call":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "arguments": ""},
        )
        for piece in _chunks(item["arguments"], chunks):
            emit(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=index,
                delta=piece,
            )
        emit(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=index,
            arguments=item["arguments"],
        )
    elif kind == "custom_tool_call":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "input": ""},
        )
        for piece in _chunks(item["input"], chunks):
            emit(
                "response.custom_tool_call_input.delta",
                item_id=item["id"],
                output_index=index,
                delta=piece,
            )
        emit(
            "response.custom_tool_call_input.done",
            item_id=item["id"],
            output_index=index,
            input=item["input"],
        )
    elif kind == "reasoning":
        _reasoning_events(emit, index, item, chunks)
    else:
        emit("response.output_item.added", output_index=index, item=item)
    emit("response.output_item.done", output_index=index, item=item)


def _reasoning_events(emit, index: int, item: dict, chunks: int) -> None:
    """A reasoning item as the API streams it: added without its summary, each summary part
    with its text deltas, then done (with the encrypted content)."""
    emit(
        "response.output_item.added",
        output_index=index,
        item={"id": item["id"], "type": "reasoning", "summary": []},
    )
    for summary_index, part in enumerate(item.get("summary") or []):
        common = {"item_id": item["id"], "output_index": index, "summary_index": summary_index}
        emit(
            "response.reasoning_summary_part.added",
            **common,
            part={"type": "summary_text", "text": ""},
        )
        for piece in _chunks(part["text"], chunks):
            emit("response.reasoning_summary_text.delta", **common, delta=piece)
        emit("response.reasoning_summary_text.done", **common, text=part["text"])
        emit("response.reasoning_summary_part.done", **common, part=part)


def responses_stream(
    output: list[dict],
    *,
    chunk_delay: float = 0.0,
    drop_after: int | None = None,
    **kwargs,
) -> Scripted:
    return Scripted(
        200,
        events=responses_stream_events(output, **kwargs),
        chunk_delay=chunk_delay,
        drop_after=drop_after,
    )


def responses_text_stream(text: str, chunks: int = 3, **kwargs) -> Scripted:
    return responses_stream([message_item(text)], chunks=chunks, **kwargs)


def responses_function_call_stream(
    name: str,
    arguments: dict | str,
    *,
    call_id: str | None = None,
    text: str | None = None,
    **kwargs,
) -> Scripted:
    output = [message_item(text)] if text else []
    output.append(function_call_item(name, arguments, call_id=call_id))
    return responses_stream(output, **kwargs)


def responses_error_event_stream(
    code: str = "server_error",
    message: str = "The server had an error while processing your request.",
    *,
    text: str = "partial ",
    **kwargs,
) -> Scripted:
    output = [message_item(text)] if text else []
    return responses_stream(output, error_event={"code": code, "message": message}, **kwargs)


# JSON answers ------------------------------------------------------------------------------


def responses_object(
    text: str | None = None,
    *,
    output: list[dict] | None = None,
    status: str = "completed",
    model: str = "gpt-fake-1",
    input_tokens: int = 100,
    output_tokens: int = 20,
    incomplete_reason: str | None = None,
    error: dict | None = None,
) -> Scripted:
    items = output if output is not None else ([message_item(text)] if text is not None else [])
    return Scripted(
        200,
        _response_object(
            items,
            status=status,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            incomplete_reason=incomplete_reason,
            error=error,
        ),
    )


def responses_error(
    status: int,
    type: str,
    code: str | None,
    message: str,
    headers: dict[str, str] | None = None,
) -> Scripted:
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return Scripted(status, body, dict(headers or {}))


def responses_rate_limited(retry_after: float | None = None) -> Scripted:
    headers = {} if retry_after is None else {"retry-after": f"{retry_after:g}"}
    return responses_error(
        429, "requests", "rate_limit_exceeded", "Rate limit reached for requests", headers
    )


def responses_overloaded() -> Scripted:
    return responses_error(529, "server_error", "overloaded", "The engine is currently overloaded")


def responses_server_error(status: int = 500) -> Scripted:
    return responses_error(
        status, "server_error", "server_error", "The server had an error processing your request"
    )


def responses_auth_error() -> Scripted:
    return responses_error(
        401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."
    )


class FakeResponsesAPI(FakeAPI):
    """With `prompt_cache=True` every answer's usage (input_tokens and
    input_tokens_details.cached_tokens) is computed from the prefixes received per
    `prompt_cache_key` (tests/support/fake_prompt_cache.py); `cache_reports` lists them."""

    route = "/v1/responses"
    url_suffix = "/v1"
    name = "fake Responses API"

    def __init__(self, *, prompt_cache: bool = False, respond=None) -> None:
        super().__init__()
        self.prompt_cache = OpenAIPromptCache() if prompt_cache else None
        self.cache_reports: list[dict] = []
        self.respond = respond  # answers every request when set (no script queue)

    def _record_and_pick(self, request: RecordedRequest) -> Scripted:
        if self.respond is None:
            return super()._record_and_pick(request)
        with self._lock:
            self._requests.append(request)
            refused = self.invalid(request)
        if refused is not None:
            return refused
        return self.answer(request, self.respond(request))

    def answer(self, request: RecordedRequest, scripted: Scripted) -> Scripted:
        if self.prompt_cache is None or scripted.status != 200:
            return scripted
        spent = self.prompt_cache.usage(request.body)
        self.cache_reports.append(spent)

        def patched(response: dict) -> dict:
            response = copy.deepcopy(response)
            if response.get("usage"):
                usage = response["usage"]
                usage["input_tokens"] = spent["input_tokens"]
                usage["input_tokens_details"] = {"cached_tokens": spent["cached_tokens"]}
                usage["total_tokens"] = spent["input_tokens"] + usage.get("output_tokens", 0)
            return response

        if scripted.events is not None:
            events = []
            for event in scripted.events:
                data = event.data
                if isinstance(data, dict) and isinstance(data.get("response"), dict):
                    data = {**data, "response": patched(data["response"])}
                events.append(SSE(event.event, data))
            return dataclasses.replace(scripted, events=tuple(events))
        if isinstance(scripted.body, dict) and "usage" in scripted.body:
            return dataclasses.replace(scripted, body=patched(scripted.body))
        return scripted

    def invalid(self, request: RecordedRequest) -> Scripted | None:
        try:
            body = request.body
        except ValueError:
            return responses_error(400, "invalid_request_error", None, "invalid JSON body")
        if not isinstance(body, dict):
            return responses_error(400, "invalid_request_error", None, "body must be an object")
        for name in ("model", "input"):
            if name not in body:
                return responses_error(
                    400,
                    "invalid_request_error",
                    "missing_required_parameter",
                    f"Missing required parameter: '{name}'.",
                )
        return None

    def error_response(self, status: int, kind: str, text: str) -> Scripted:
        return responses_error(status, kind, None, text)
