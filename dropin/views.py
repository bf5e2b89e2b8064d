"""The drop-in endpoints: `POST /openai/v1/chat/completions`, `GET /openai/v1/models`,
`POST /anthropic/v1/messages`, `POST /anthropic/v1/messages/count_tokens`.

Plain Django views (not DRF): each wire has its own error shape and stream format, which
the SDKs parse byte for byte. A request is refused (in the wire's shape) before anything
is written; then its new messages are stored, the upstream is called with no transaction
open, and the answer is stored (a partial one too, when the client goes away).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import close_old_connections
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from core.ids import new_id
from dropin import recovery, services, wire_anthropic, wire_openai
from dropin import tools as dropin_tools
from dropin.auth import key_from_headers, user_for_key
from dropin.errors import DropinError, broken
from dropin.receipt_items import receipt_context
from dropin.requests import DropinRequest
from providers import blocks
from providers.base import (
    Finished,
    ProviderRequest,
    RawEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
)
from providers.config import model_get, models, require_key
from providers.errors import MissingKey, ProviderError, ToolOrderingError, UnknownModel
from providers.registry import provider_for
from receipts.context import call_context
from turns.journal import StreamJournal

logger = logging.getLogger("lcm.dropin")

KEY_HEADER = "X-LCM-Conversation"
MAX_KEY_LENGTH = 200


def _error(wire, error: DropinError) -> JsonResponse:
    response = JsonResponse(wire.error_body(error), status=error.status)
    for name, value in error.headers.items():
        response[name] = value
    return response


def _body(request) -> dict:
    try:
        raw = request.body
    except RequestDataTooBig:
        raise DropinError(
            413, "too_large", f"the request body exceeds {settings.LCM_MAX_REQUEST_BYTES} bytes"
        ) from None
    if len(raw) > settings.LCM_MAX_REQUEST_BYTES:
        raise DropinError(
            413, "too_large", f"the request body exceeds {settings.LCM_MAX_REQUEST_BYTES} bytes"
        )
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError):
        raise DropinError(
            400, "invalid_request", "the body is not valid JSON", param="body"
        ) from None
    if not isinstance(body, dict):
        raise DropinError(400, "invalid_request", "the body must be a JSON object", param="body")
    return body


def _user(request):
    user = user_for_key(key_from_headers(request.headers))
    if user is None:
        raise DropinError(
            401,
            "authentication",
            "invalid API key: send an LCM API token as `Authorization: Bearer KEY` or `x-api-key`",
            code="invalid_api_key",
        )
    return user


def _spec(name: str):
    try:
        spec = model_get(name)
    except UnknownModel as error:
        raise DropinError(
            404, "not_found", error.message, param="model", code="model_not_found"
        ) from None
    try:
        require_key(spec)
    except MissingKey as error:
        raise DropinError(
            400, "invalid_request", error.message, param="model", code="missing_api_key"
        ) from None
    return spec


def _conversation_key(request) -> str | None:
    key = request.headers.get(KEY_HEADER)
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_KEY_LENGTH:
        raise DropinError(
            400,
            "invalid_request",
            f"{KEY_HEADER} must be 1 to {MAX_KEY_LENGTH} characters",
            param=KEY_HEADER,
        )
    return key


def _memory_tools_requested(request) -> bool:
    """`X-LCM-Tools: memory` (the only value known today)."""
    value = (request.headers.get("X-LCM-Tools") or "").strip().lower()
    return value == "memory"


@dataclass(frozen=True)
class _Prepared:
    """A drop-in request checked and placed in its thread, before the upstream call."""

    user: object
    parsed: DropinRequest
    spec: object
    extra_tools: list
    plan: object
    thread: object
    place: services.AnswerPlace
    upstream: object


def _serve(request, wire) -> HttpResponse:
    started = time.perf_counter()
    try:
        prepared = _prepare(request, wire)
    except DropinError as error:
        return _error(wire, error)
    parsed, extra_tools = prepared.parsed, prepared.extra_tools
    provider_request = _provider_request(prepared)
    headers = _headers(prepared)
    answer_id = ("chatcmpl-" if wire is wire_openai else "msg_") + new_id().lower()
    headers["X-LCM-Server-Ms"] = f"{(time.perf_counter() - started) * 1000:.2f}"
    receipt = receipt_context(
        thread=prepared.thread, upstream=prepared.upstream, wire=wire.__name__.rsplit(".", 1)[-1]
    )
    with call_context(**receipt):
        if parsed.stream and not extra_tools:
            return _stream(wire, parsed, provider_request, prepared.place, headers, answer_id)
        try:
            if extra_tools:
                response, steps = _memory_loop(
                    provider_request, user=prepared.user, thread=prepared.thread
                )
                headers["X-LCM-Tool-Steps"] = str(steps)
            else:
                response = provider_for(prepared.spec).complete(provider_request)
        except ProviderError as error:
            return _error(wire, _upstream_error(error))
    services.answer_store(
        place=prepared.place, blocks=response.blocks, status=response.outcome["status"]
    )
    return _answered(wire, parsed, response, answer_id, headers)


def _prepare(request, wire) -> _Prepared:
    """Authenticate, parse, refuse what the upstream cannot take, and find the thread the
    request continues (nothing is stored before every check passed)."""
    user = _user(request)
    parsed: DropinRequest = wire.parse(_body(request))
    spec = _spec(parsed.model)
    key = _conversation_key(request)
    extra_tools = _memory_tools(request, parsed)
    # Refuse what the upstream cannot take (tool ordering, another provider's
    # reasoning) before storing anything.
    kinds = {block.get("type") for message in parsed.messages for block in message["blocks"]}
    _check_ordering(parsed, kinds)
    _check_expressible(parsed, spec, kinds)
    plan, thread = services.thread_for(user=user, request=parsed, key=key, spec=spec)
    place = services.AnswerPlace.of(thread, plan)
    upstream = services.upstream_messages(
        thread=thread, request=parsed, spec=spec, extra_tools=extra_tools
    )
    return _Prepared(user, parsed, spec, extra_tools, plan, thread, place, upstream)


def _memory_tools(request, parsed: DropinRequest) -> list:
    """The memory tools' definitions when asked for (header or setting); a client tool of
    the same name is refused."""
    memory = _memory_tools_requested(request) or settings.LCM_DROPIN_MEMORY_TOOLS
    extra_tools = dropin_tools.definitions() if memory else []
    clash = {t["name"] for t in parsed.tools} & {t["name"] for t in extra_tools}
    if clash:
        raise DropinError(
            400,
            "invalid_request",
            f"tools: {', '.join(sorted(clash))} is a memory tool name; rename the client tool",
            param="tools",
        )
    return extra_tools


def _provider_request(prepared: _Prepared) -> ProviderRequest:
    parsed, spec, upstream = prepared.parsed, prepared.spec, prepared.upstream
    return ProviderRequest(
        model=spec,
        system=upstream.system,
        messages=upstream.messages,
        tools=parsed.tools + prepared.extra_tools,
        max_output_tokens=services.max_output(spec, parsed),
        options=parsed.options,
        purpose="turn",
        conversation_id=prepared.thread.conversation_id,
        cache=services.upstream_cache(spec, upstream),
    )


def _headers(prepared: _Prepared) -> dict[str, str]:
    """What the answer says about its thread (docs/drop-in.md, "Headers")."""
    upstream = prepared.upstream
    return {
        KEY_HEADER: prepared.plan.key,
        "X-LCM-Conversation-Id": str(prepared.thread.conversation_id),
        "X-LCM-Tokens-Sent": str(upstream.tokens),
        "X-LCM-Compacted": "true" if upstream.compacted else "false",
        "X-LCM-Forked": "true" if prepared.plan.forks else "false",
    }


def _answered(wire, parsed, response, answer_id: str, headers: dict) -> HttpResponse:
    """The stored answer in the wire's shape: streamed (memory tools ran first), an error
    when the upstream failed, else the JSON body."""
    if parsed.stream:  # memory tools: the final answer, streamed in the wire's format
        result = StreamingHttpResponse(
            _replayed(wire, parsed, response, answer_id),
            content_type="text/event-stream; charset=utf-8",
        )
    elif broken(response):
        return _error(
            wire,
            DropinError(
                502, "upstream", response.outcome.get("message") or "the upstream model failed"
            ),
        )
    else:
        result = JsonResponse(wire.response_body(parsed, response, answer_id))
    for name, value in headers.items():
        result[name] = value
    return result


def _memory_loop(provider_request: ProviderRequest, *, user, thread):
    """Call the model; while it calls only memory tools, run them and call it again (at
    most LCM_TURN_MAX_STEPS calls). The client sees its own tool calls and the answer only:
    memory tool calls are taken out of what it gets."""
    provider = provider_for(provider_request.model)
    messages = list(provider_request.messages)
    steps = 0
    while True:
        steps += 1
        response = provider.complete(replace(provider_request, messages=messages))
        calls = [block for block in response.blocks if block["type"] == "tool_use"]
        ours = [call for call in calls if call["name"] in dropin_tools.NAMES]
        if not ours:
            return response, steps
        if len(ours) != len(calls) or steps >= settings.LCM_TURN_MAX_STEPS:
            response.blocks = [
                block
                for block in response.blocks
                if not (block["type"] == "tool_use" and block["name"] in dropin_tools.NAMES)
            ]
            return response, steps
        results = []
        for call in ours:
            outcome = dropin_tools.execute(
                user=user,
                conversation_id=thread.conversation_id,
                name=call["name"],
                input=call.get("input") or {},
            )
            results.append(blocks.tool_result(call["id"], outcome.text, outcome.is_error))
        messages += [
            {"role": "assistant", "blocks": response.blocks},
            {"role": "user", "blocks": results},
        ]


def _replayed(wire, parsed, response, answer_id):
    """A whole response as the wire's stream (the memory tool loop ran before it)."""
    writer = wire.StreamWriter(parsed, answer_id)
    yield from writer.start()
    for index, block in enumerate(response.blocks):
        if block["type"] == "text" and block["text"]:
            yield from writer.event(TextDelta(index, block["text"]))
        elif block["type"] == "tool_use":
            yield from writer.event(ToolCallStart(index, block["id"], block["name"]))
            yield from writer.event(ToolCallDelta(index, json.dumps(block["input"])))
    yield from writer.finish(response)


_TOOL_BLOCKS = frozenset(("tool_use", "tool_result"))


def _check_ordering(parsed: DropinRequest, kinds: set) -> None:
    from providers.ordering import check_tool_ordering, tool_results_first

    # The rules concern tool calls and results only (the roles are ours after parsing): a
    # history without any passes, and is not walked twice.
    if kinds.isdisjoint(_TOOL_BLOCKS) and all(
        message.get("role") in blocks.ROLES for message in parsed.messages
    ):
        return
    try:
        check_tool_ordering([tool_results_first(message) for message in parsed.messages])
    except ToolOrderingError as error:
        raise DropinError(400, "invalid_request", f"messages: {error}", param="messages") from None


def _check_expressible(parsed: DropinRequest, spec, kinds: set) -> None:
    """Thinking blocks (Anthropic's, sent back by an Anthropic-wire client) mean nothing to
    another provider: refused rather than silently dropped."""
    if spec.provider == "anthropic" or "reasoning" not in kinds:
        return
    for position, message in enumerate(parsed.messages):
        if any(block["type"] == "reasoning" for block in message["blocks"]):
            raise DropinError(
                400,
                "invalid_request",
                f"messages.{position}.content: thinking blocks can only be sent to an Anthropic "
                f"model; {parsed.model!r} is served by {spec.provider}",
                param=f"messages.{position}.content",
            )


def _upstream_error(error: ProviderError) -> DropinError:
    status = error.status if error.status and 400 <= error.status < 600 else 502
    return DropinError(
        status,
        "upstream",
        f"upstream {error.provider or 'model'}: {error.message}",
        code=error.code,
    )


def _stream(wire, parsed, provider_request, place, headers, answer_id) -> HttpResponse:
    provider = provider_for(provider_request.model)
    try:
        events = provider.stream(provider_request)
        first = next(events)  # opens the call: errors before the first byte are refused here
    except ProviderError as error:
        return _error(wire, _upstream_error(error))
    close_old_connections()  # no database connection is held while the stream runs

    def body():
        writer = wire.StreamWriter(parsed, answer_id)
        journal = _journal(answer_id, provider_request.model, place)
        collected: list = []
        finished = None
        stored = False
        try:
            yield from writer.start()
            pending = [first]
            while True:
                event = pending.pop() if pending else next(events, None)
                if event is None:
                    break
                if isinstance(event, Finished):
                    finished = event.response
                    break
                if isinstance(event, RawEvent):
                    journal.write(event.event_type, event.payload)
                    continue
                collected.append(event)
                yield from writer.event(event)
            if finished is not None:
                services.answer_store(
                    place=place,
                    blocks=finished.blocks,
                    status=finished.outcome["status"],
                )
                stored = True
                yield from writer.finish(finished)
        finally:
            if finished is None:  # the client went away: keep what came, marked incomplete
                events.close()
                try:
                    services.answer_store(
                        place=place,
                        blocks=_partial_blocks(collected),
                        status="incomplete",
                    )
                    stored = True
                except Exception:
                    logger.exception("storing a partial drop-in answer failed")
            journal.close()
            if stored:  # the conversation holds the answer: the journal has done its job
                journal.path.unlink(missing_ok=True)
            close_old_connections()

    response = StreamingHttpResponse(body(), content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    for name, value in headers.items():
        response[name] = value
    return response


def _journal(answer_id: str, spec, place: services.AnswerPlace) -> StreamJournal:
    """The stream's journal: where its answer goes, then every upstream wire event as it
    arrives (handed to the OS at least every 250 ms, fsynced every 2 s, as a turn's); kept
    until the answer is stored. One left behind by a process that died mid-stream is
    stored, incomplete, when the server starts again (dropin/recovery.py)."""
    journal = StreamJournal(
        step_id=answer_id,
        provider=spec.provider,
        path=recovery.journal_dir() / f"{answer_id}.jsonl",
    )
    journal.write(recovery.PLACE_EVENT, {"model": spec.name, **asdict(place)})
    return journal


def _partial_blocks(events: list) -> list[dict]:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return [blocks.text(text)] if text else []


@csrf_exempt
@require_POST
def chat_completions(request) -> HttpResponse:
    return _serve(request, wire_openai)


@csrf_exempt
@require_POST
def anthropic_messages(request) -> HttpResponse:
    return _serve(request, wire_anthropic)


@csrf_exempt
@require_POST
def anthropic_count_tokens(request) -> HttpResponse:
    try:
        _user(request)
        parsed = wire_anthropic.parse(_body(request), counting=True)
        try:
            model_get(parsed.model)
        except UnknownModel as error:
            raise DropinError(404, "not_found", error.message, param="model") from None
    except DropinError as error:
        return _error(wire_anthropic, error)
    tokens = services.request_tokens(parsed.system, parsed.messages, parsed.tools)
    return JsonResponse({"input_tokens": tokens})


@require_GET
def openai_models(request) -> HttpResponse:
    try:
        _user(request)
    except DropinError as error:
        return _error(wire_openai, error)
    return JsonResponse(
        {
            "object": "list",
            "data": [
                {"id": spec.name, "object": "model", "created": 0, "owned_by": spec.provider}
                for spec in models()
            ],
        }
    )
