"""The one request pipeline every drop-in wire goes through:

  parse (the wire's module) → identify the caller and the conversation → store the new
  inbound messages → assemble within the budget → call the upstream (dropin/upstream.py)
  → answer: relayed as a stream while journaled, or whole; the answer is stored.

A wire is a module of dropin/wires/ (see its docstring for the interface); a view hands the
HTTP request and its wire to `serve`, and nothing else. A request is refused (in the wire's
shape) before anything is written; no transaction is open during the upstream call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.db import close_old_connections
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse

from core.ids import new_id
from dropin import (
    checkpoint,
    forward,
    forward_context,
    inbound,
    relay,
    services,
    stored_responses,
    upstream,
)
from dropin import tools as dropin_tools
from dropin.errors import DropinError, broken, error_response, upstream_error
from dropin.memory_loop import memory_loop
from dropin.requests import DropinRequest, for_translation
from dropin.upstream_specs import spec_for
from dropin.wires import Wire
from providers import blocks
from providers.base import ProviderRequest
from providers.config import require_key
from providers.errors import MissingKey, ProviderError, ToolOrderingError, UnknownModel

STREAM_TYPE = "text/event-stream; charset=utf-8"


@dataclass(frozen=True)
class Prepared:
    """A drop-in request checked, its messages stored, before the upstream call."""

    caller: inbound.Caller
    parsed: DropinRequest
    spec: object
    extra_tools: list
    plan: services.Plan
    thread: object
    place: services.AnswerPlace
    upstream: services.Upstream | None  # what a translated request sends
    body: dict  # the client's JSON body
    forwarded: bool = False  # same-wire pass-through (dropin/forward.py)
    replaced: services.Replaced | None = None  # a forwarded request's replaced messages
    wire: object = None

    @property
    def user(self):
        return self.caller.user


def serve(request, wire: Wire) -> HttpResponse:
    """A model request on `wire`, answered in the wire's shape."""
    started = time.perf_counter()
    try:
        prepared = prepare(request, wire)
    except DropinError as error:
        return error_response(wire, error)
    headers = _headers(prepared)
    answer_id = wire.ID_PREFIX + new_id().lower()
    headers["X-LCM-Server-Ms"] = f"{(time.perf_counter() - started) * 1000:.2f}"
    parsed = prepared.parsed
    if parsed.options.get("checkpoint"):
        return _checkpoint(wire, prepared, answer_id, headers)
    if prepared.forwarded:
        return forward.serve(
            request,
            wire,
            prepared,
            headers,
            answer_id,
            lambda limit, sent: _smaller(prepared, limit, sent),
        )
    provider_request = _provider_request(prepared)
    with upstream.receipted(thread=prepared.thread, sent=prepared.upstream, wire=wire.NAME):
        if parsed.stream and not prepared.extra_tools:
            return _streamed(request, wire, prepared, provider_request, headers, answer_id)
        try:
            if prepared.extra_tools:
                response, steps = memory_loop(
                    provider_request,
                    user=prepared.user,
                    conversation_id=prepared.thread.conversation_id,
                )
                headers["X-LCM-Tool-Steps"] = str(steps)
            else:
                response = upstream.complete(provider_request)
        except ProviderError as error:
            return error_response(wire, upstream_error(error))
    services.answer_store(
        place=prepared.place, blocks=response.blocks, status=response.outcome["status"]
    )
    if hasattr(wire, "remember") and not broken(response):  # the wire keeps its answers
        answer = wire.response_body(parsed, response, answer_id)
        wire.remember(parsed, conversation_id=prepared.thread.conversation_id, answer=answer)
    return _answered(wire, parsed, response, answer_id, headers)


def _checkpoint(wire, prepared: Prepared, answer_id: str, headers: dict) -> HttpResponse:
    """The agent asked to compact: answered from the product's compaction of the stored
    conversation (dropin/checkpoint.py), without a model call; the answer is not stored (it
    is derived from what is)."""
    parsed = prepared.parsed
    trigger = parsed.options["checkpoint"] == "trigger"
    text = checkpoint.checkpoint_text(prepared.thread.conversation_id, with_user_messages=trigger)
    response = checkpoint.answer(text, model=parsed.model, trigger=trigger)
    headers["X-LCM-Checkpoint"] = "true"
    if parsed.stream:
        result = StreamingHttpResponse(
            relay.replayed(wire, parsed, response, answer_id), content_type=STREAM_TYPE
        )
    else:
        result = JsonResponse(wire.response_body(parsed, response, answer_id))
    for name, value in headers.items():
        result[name] = value
    return result


def prepare(request, wire: Wire) -> Prepared:
    """Authenticate, parse, refuse what the upstream cannot take, store the request's new
    messages in the thread it continues, and decide what the upstream is sent (nothing is
    stored before every check passed)."""
    caller = inbound.caller(request)
    body = inbound.json_body(request)
    if hasattr(wire, "resolve"):  # a stateful wire: the body continues a stored answer
        body = wire.resolve(body, user=caller.user)
    parsed: DropinRequest = wire.parse(body)
    passthrough = getattr(wire, "PASSTHROUGH", None)
    spec = model_spec(parsed.model, passthrough, max_tokens=parsed.max_tokens)
    forwarded = passthrough is not None and spec.provider == passthrough.provider
    if not forwarded:
        _require_key(spec)
    key = inbound.conversation_key(request)
    if key is None and hasattr(wire, "session_key"):  # the agent's own session id
        key = wire.session_key(parsed, owner=caller.user.pk)
    extra_tools = [] if forwarded else _memory_tools(request, parsed)
    # Refuse what the upstream cannot take (tool ordering, another provider's
    # reasoning) before storing anything; a forwarded request is the upstream's to judge.
    if not forwarded:
        kinds = {b.get("type") for message in parsed.messages for b in message["blocks"]}
        _check_ordering(parsed, kinds)
        _check_expressible(parsed, spec, kinds)
    plan, thread = services.thread_for(user=caller.user, request=parsed, key=key, spec=spec)
    place = services.AnswerPlace.of(thread, plan)
    if forwarded:
        budget = services.input_budget(spec, parsed)
        replaced = None  # a checkpoint is answered without the upstream
        if not parsed.options.get("checkpoint"):
            replaced = forward_context.forwarded_context(
                thread=thread, request=parsed, plan=plan, budget=budget
            )
        return Prepared(
            caller, parsed, spec, [], plan, thread, place, None, body, True, replaced, wire
        )
    sent = services.upstream_messages(
        thread=thread, request=parsed, spec=spec, extra_tools=extra_tools
    )
    return Prepared(caller, parsed, spec, extra_tools, plan, thread, place, sent, body, wire=wire)


def _smaller(prepared: Prepared, limit: int, sent: int | None) -> services.Replaced:
    """The upstream answered `prompt is too long`: compact harder, to 80% of the lower of
    its limit (when it named one) and what was sent (by our estimate)."""
    parsed = prepared.parsed
    if sent is None:
        sent = services.request_total(parsed)
    target = int(min(sent, limit) * 0.8) if limit > 0 else int(sent * 0.8)
    return forward_context.forwarded_context(
        thread=prepared.thread, request=parsed, plan=prepared.plan, budget=target, force=True
    )


def model_spec(name: str, passthrough=None, *, max_tokens: int | None = None):
    """The named model (an unlisted name on a pass-through wire: that wire's upstream)."""
    try:
        return spec_for(name, passthrough, max_tokens=max_tokens)
    except UnknownModel as error:
        raise DropinError(
            404, "not_found", error.message, param="model", code="model_not_found"
        ) from None


def _require_key(spec) -> None:
    try:
        require_key(spec)
    except MissingKey as error:
        raise DropinError(
            400, "invalid_request", error.message, param="model", code="missing_api_key"
        ) from None


def _memory_tools(request, parsed: DropinRequest) -> list:
    """The memory tools' definitions when asked for (header or setting); a client tool of
    the same name is refused."""
    extra_tools = dropin_tools.definitions() if inbound.memory_tools_requested(request) else []
    clash = {t["name"] for t in parsed.tools} & {t["name"] for t in extra_tools}
    if clash:
        raise DropinError(
            400,
            "invalid_request",
            f"tools: {', '.join(sorted(clash))} is a memory tool name; rename the client tool",
            param="tools",
        )
    return extra_tools


def _provider_request(prepared: Prepared) -> ProviderRequest:
    parsed, spec, sent = prepared.parsed, prepared.spec, prepared.upstream
    return ProviderRequest(
        model=spec,
        system=sent.system,
        messages=for_translation(sent.messages),
        tools=parsed.tools + prepared.extra_tools,
        max_output_tokens=services.max_output(spec, parsed),
        options=parsed.options,
        purpose="turn",
        conversation_id=prepared.thread.conversation_id,
        cache=services.upstream_cache(spec, sent),
    )


def _headers(prepared: Prepared) -> dict[str, str]:
    """What the answer says about its thread (docs/drop-in.md, "Headers")."""
    if prepared.forwarded:
        replaced, parsed = prepared.replaced, prepared.parsed
        tokens = replaced.tokens if replaced else services.request_total(parsed)
        compacted = replaced is not None
    else:
        tokens, compacted = prepared.upstream.tokens, prepared.upstream.compacted
    return {
        inbound.KEY_HEADER: prepared.plan.key,
        "X-LCM-Conversation-Id": str(prepared.thread.conversation_id),
        "X-LCM-Tokens-Sent": str(tokens),
        "X-LCM-Compacted": "true" if compacted else "false",
        "X-LCM-Forked": "true" if prepared.plan.forks else "false",
    }


def _answered(wire, parsed, response, answer_id: str, headers: dict) -> HttpResponse:
    """The stored answer in the wire's shape: streamed (memory tools ran first), an error
    when the upstream failed, else the JSON body."""
    if parsed.stream:  # memory tools: the final answer, streamed in the wire's format
        result = StreamingHttpResponse(
            relay.replayed(wire, parsed, response, answer_id), content_type=STREAM_TYPE
        )
    elif broken(response):
        return error_response(
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


def _streamed(request, wire, prepared: Prepared, provider_request, headers, answer_id):
    try:
        events = upstream.stream(provider_request)
        first = next(events)  # opens the call: errors before the first byte are refused here
    except ProviderError as error:
        return error_response(wire, upstream_error(error))
    close_old_connections()  # no database connection is held while the stream runs
    body = relay.relayed(
        wire,
        prepared.parsed,
        first,
        events,
        place=prepared.place,
        model=provider_request.model,
        answer_id=answer_id,
    )
    response = StreamingHttpResponse(relay.served(request, body), content_type=STREAM_TYPE)
    response["Cache-Control"] = "no-cache"
    for name, value in headers.items():
        response[name] = value
    return response


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
        if any(_anthropic_thinking(block) for block in message["blocks"]):
            raise DropinError(
                400,
                "invalid_request",
                f"messages.{position}.content: thinking blocks can only be sent to an Anthropic "
                f"model; {parsed.model!r} is served by {spec.provider}",
                param=f"messages.{position}.content",
            )


def _anthropic_thinking(block: dict) -> bool:
    """A thinking block (an OpenAI reasoning item goes to a Responses upstream as it came,
    and is left out for a model on another wire, as the adapters do)."""
    return block["type"] == "reasoning" and (block.get("raw") or {}).get("type") != "reasoning"


def count_tokens(request, wire: Wire) -> HttpResponse:
    """`count_tokens`: what the request would cost as it would be sent (nothing stored).
    On a pass-through wire it is asked of the upstream with the body that would be sent
    (the assembled context's when the request is past the budget of a stored thread)."""
    try:
        caller = inbound.caller(request)
        body = inbound.json_body(request)
        parsed = wire.parse(body, counting=True)
        passthrough = getattr(wire, "PASSTHROUGH", None)
        spec = model_spec(parsed.model, passthrough, max_tokens=parsed.max_tokens)
    except DropinError as error:
        return error_response(wire, error)
    replaced = forward_context.counted_context(user=caller.user, request=parsed, spec=spec)
    if passthrough is not None and spec.provider == passthrough.provider:
        try:
            return forward.count(request, wire, body, spec, caller, replaced)
        except DropinError as error:
            return error_response(wire, error)
    if replaced is not None:
        return JsonResponse({"input_tokens": replaced.tokens})
    tokens = services.request_tokens(parsed.system, parsed.messages, parsed.tools)
    return JsonResponse({"input_tokens": tokens})


def base_probe(request) -> HttpResponse:
    """`HEAD` (or `GET`) on a wire's base URL: Claude Code checks it on start."""
    return HttpResponse(b"" if request.method == "HEAD" else b"ok", content_type="text/plain")


def stored_response(request, wire, response_id: str) -> HttpResponse:
    """`GET` / `DELETE` of an answer a stateful wire kept (the Responses wire's store)."""
    try:
        user = inbound.caller(request).user
        if request.method == "DELETE":
            stored_responses.delete(user=user, response_id=response_id)
            return JsonResponse({"id": response_id, "object": "response", "deleted": True})
        return JsonResponse(stored_responses.get(user=user, response_id=response_id).body)
    except DropinError as error:
        return error_response(wire, error)


def models_list(request, wire) -> HttpResponse:
    """The configured models, in the wire's list shape."""
    try:
        inbound.caller(request)
    except DropinError as error:
        return error_response(wire, error)
    return JsonResponse(wire.models_body())
