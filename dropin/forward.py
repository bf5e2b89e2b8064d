"""Same-wire pass-through: a request whose upstream speaks the client's own wire reaches it
as the client sent it (body bytes and headers in order), except what the server replaces
on purpose: the model's configured id, and past the budget the messages (the assembled
context's summaries, then the client's own messages from where the assembler's verbatim
tail begins). The answer goes back byte for byte as the upstream sent it (every event,
pings and errors included) while each event is journaled and the answer stored.

Credentials (docs/drop-in.md): with `X-LCM-Token` the client's own `x-api-key` or
`Authorization` goes upstream unchanged; else the server's key replaces the LCM token the
SDK sent. No credential is stored, journaled or logged.

Every wire that passes requests through (dropin/wires/: Anthropic Messages, OpenAI
Responses) goes through here; the wire's module gives the bytes sent (`forward_body`) and
reads a whole answer (`answer_from_body`); a stateful wire keeps the answer (`remember`).

An upstream answer `prompt is too long` (Anthropic) or `context_length_exceeded` (OpenAI)
is never passed on: the request is sent again with a budget below the limit the upstream
named (at most twice more)."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterator

from django.db import close_old_connections
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse

from dropin import relay, services, upstream
from dropin.errors import DropinError, error_response, upstream_error
from providers.caching import anthropic_min_tokens
from providers.config import require_key
from providers.errors import MissingKey, ProviderError
from providers.replay import response_from_raw_events

logger = logging.getLogger("lcm.dropin")

# Request headers that describe this hop, not the request (RFC 9110 7.6.1), and ours.
_NOT_FORWARDED = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-connection",
        "accept-encoding",  # the server reads the answer as it relays it
        "expect",
        "cookie",
    }
)
_CREDENTIALS = frozenset({"x-api-key", "authorization"})
_RESPONSE_NOT_RELAYED = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive"}
)
_TOO_LONG = re.compile(r"prompt is too long(?::\s*(\d+)\s*tokens\s*>\s*(\d+))?", re.I)
# OpenAI's wording (code `context_length_exceeded`): "maximum context length is N tokens"
# or "exceeds the context window of this model".
_CONTEXT_LIMIT = re.compile(r"maximum context length is (\d+) tokens", re.I)
RETRIES_TOO_LONG = 2


def headers_for(request, passthrough, spec, *, own_credentials: bool) -> list[tuple[str, str]]:
    headers = []
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in _NOT_FORWARDED or lower.startswith("x-lcm-"):
            continue
        if lower in _CREDENTIALS and not own_credentials:
            continue  # the LCM token: never sent upstream
        headers.append((name, value))
    if not own_credentials:
        try:
            key = require_key(spec)
            headers.append((passthrough.key_header, passthrough.key_prefix + key))
        except MissingKey as error:
            raise DropinError(
                400, "invalid_request", error.message, param="model", code="missing_api_key"
            ) from None
    return headers


def url_for(request, passthrough, spec) -> str:
    base = (
        os.environ.get(spec.base_url_env or "", "").strip()
        or os.environ.get(passthrough.base_url_env, "").strip()
        or passthrough.default_base_url
    ).rstrip("/")
    path = request.path.removeprefix(passthrough.prefix)
    query = request.META.get("QUERY_STRING", "")
    return base + path + (f"?{query}" if query else "")


def serve(request, wire, prepared, headers: dict, answer_id: str, retry) -> HttpResponse:
    """`retry(limit, sent)`: the replaced messages for a smaller budget, when the upstream
    answered `prompt is too long` (its limit, or -1; what was sent, by our estimate)."""
    passthrough = wire.PASSTHROUGH
    call_headers = headers_for(
        request, passthrough, prepared.spec, own_credentials=prepared.caller.own_credentials
    )
    url = url_for(request, passthrough, prepared.spec)
    replaced = prepared.replaced
    for attempt in range(RETRIES_TOO_LONG + 1):
        body = wire.forward_body(
            prepared.body,
            request.body,
            model_id=prepared.spec.model_id,
            replaced=replaced,
            mark=_marks_wanted(prepared, replaced),
        )
        call = upstream.Forward(url, call_headers, body)
        started = time.perf_counter()
        try:
            response = upstream.forward(call)
        except ProviderError as error:
            return error_response(wire, upstream_error(error))
        receipt = _receipt_writer(prepared, wire, call, started, compacted=replaced is not None)
        if response.status_code < 400:
            break
        content = response.read()
        response.close()
        receipt({"status": "failed", "error": str(response.status_code)})
        limit = _too_long_limit(response.status_code, content)
        if limit is None or attempt == RETRIES_TOO_LONG:
            return _relayed_whole(response, content, headers)
        replaced = retry(limit, replaced.tokens if replaced else None)
        headers["X-LCM-Compacted"] = "true"
        headers["X-LCM-Tokens-Sent"] = str(replaced.tokens)
    if "text/event-stream" in response.headers.get("content-type", ""):
        close_old_connections()  # no database connection is held while the stream runs
        relayed = _relay(response, prepared, wire, answer_id, receipt)
        result = StreamingHttpResponse(relay.served(request, relayed))
    else:
        content = response.read()
        response.close()
        receipt(_facts(_store_whole(prepared, wire, content)))
        result = HttpResponse(content)
    _copy_headers(response, result, headers)
    return result


def _marks_wanted(prepared, replaced) -> bool:
    """The server marks the prefix of a client that marks none (and is no agent session),
    where the request reaches
    the model's minimum cacheable length (providers/caching.py) and caching is on."""
    spec, parsed = prepared.spec, prepared.parsed
    if spec.cache != "auto" or parsed.session:  # an agent caches as it means to
        return False
    tokens = replaced.tokens if replaced else services.request_total(parsed)
    return tokens >= anthropic_min_tokens(spec.model_id)


def _too_long_limit(status: int, content: bytes) -> int | None:
    """The upstream's token limit when it answered that the input is too long (Anthropic's
    `prompt is too long`, OpenAI's `context_length_exceeded`); -1 when it named no limit
    (the caller then shrinks to 80% of what it sent)."""
    if status != 400 or not (b"too long" in content or b"context_length_exceeded" in content):
        return None
    try:
        error = json.loads(content)["error"]
        message = str(error.get("message") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if error.get("code") == "context_length_exceeded":
        match = _CONTEXT_LIMIT.search(message)
        return int(match.group(1)) if match else -1
    match = _TOO_LONG.search(message)
    if match is None:
        return None
    return int(match.group(2)) if match.group(2) else -1


def _relayed_whole(response, content: bytes, headers: dict) -> HttpResponse:
    result = HttpResponse(content)
    _copy_headers(response, result, headers)
    return result


def _copy_headers(response, result: HttpResponse, headers: dict) -> None:
    result.status_code = response.status_code
    for name, value in response.headers.multi_items():
        if name.lower() not in _RESPONSE_NOT_RELAYED:
            result[name] = value
    for name, value in headers.items():
        result[name] = value


def _receipt_writer(prepared, wire, call, started: float, *, compacted: bool):
    """What writes this call's receipt once its outcome is known (dropin/upstream.py)."""

    def write(facts: dict) -> None:
        upstream.forwarded_receipt(
            thread=prepared.thread,
            wire=wire.NAME,
            call=call,
            model=prepared.spec.model_id,
            facts=facts,
            started=started,
            compacted=compacted,
        )

    return write


def _facts(answer) -> dict:
    """A receipt's account of what came back (docs/receipts.md)."""
    if answer is None:
        return {"status": "completed"}
    outcome = answer.outcome or {}
    return {
        "status": outcome.get("status") or "completed",
        "stop": outcome.get("reason"),
        "usage": dict(answer.usage or {}),
    }


def _store_whole(prepared, wire, content: bytes):
    """The answer stored (and kept, on a stateful wire); returned (None when the body is
    not an answer, e.g. an error)."""
    try:
        raw = json.loads(content)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    answer = wire.answer_from_body(prepared.spec, raw)
    if answer is not None:
        _stored(prepared, wire, answer, answer.outcome["status"])
    return answer


def _stored(prepared, wire, answer, status: str) -> None:
    """The answer appended to the thread: from the upstream's own content blocks when it
    spoke them (Anthropic's, verbatim), else from our blocks; a completed answer on a
    stateful wire is kept under its id (the Responses wire's store)."""
    services.answer_store(
        place=prepared.place,
        blocks=answer.blocks,
        status=status,
        raw=(answer.raw_response or {}).get("content") or None,
    )
    if hasattr(wire, "remember") and status == "completed" and answer.raw_response:
        wire.remember(
            prepared.parsed,
            conversation_id=prepared.thread.conversation_id,
            answer=answer.raw_response,
        )


def _relay(response, prepared, wire, answer_id: str, receipt) -> Iterator[bytes]:
    """The upstream's bytes as they come; each event journaled; the answer stored at the
    end (marked incomplete when the stream or the client went away first)."""
    journal = relay.journal_for(answer_id, prepared.spec, prepared.place, wire=wire.NAME)
    decoder = SseDecoder()
    events: list[tuple[str, dict]] = []
    ended = False
    try:
        for chunk in response.iter_bytes():
            yield chunk
            for event in decoder.feed(chunk):
                journal.write(*event)
                events.append(event)
        ended = True
    finally:
        response.close()
        answer = response_from_raw_events(prepared.spec, {}, events)
        status = answer.outcome["status"] if ended else "incomplete"
        receipt({**_facts(answer), "status": status})
        try:
            _stored(prepared, wire, answer, status)
            journal.close()
            journal.path.unlink(missing_ok=True)
        except Exception:
            logger.exception("storing a passed-through answer failed")
            journal.close()
        close_old_connections()


class SseDecoder:
    """Server-sent events from byte chunks: (event type, JSON payload) per complete event
    (an event whose data is not JSON is skipped; it still reached the client)."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, chunk: bytes) -> Iterator[tuple[str, dict]]:
        self.buffer += chunk.replace(b"\r\n", b"\n")
        while b"\n\n" in self.buffer:
            frame, self.buffer = self.buffer.split(b"\n\n", 1)
            event, data = None, []
            for line in frame.decode("utf-8", "replace").split("\n"):
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
            if not data:
                continue
            try:
                payload = json.loads("\n".join(data))
            except ValueError:
                continue
            if isinstance(payload, dict):
                yield event or str(payload.get("type", "message")), payload


def count(request, wire, body: dict, spec, caller, replaced) -> HttpResponse:
    """`count_tokens` asked of the upstream for the body that would be sent."""
    passthrough = wire.PASSTHROUGH
    call_headers = headers_for(request, passthrough, spec, own_credentials=caller.own_credentials)
    sent = wire.forward_body(body, request.body, model_id=spec.model_id, replaced=replaced)
    try:
        response = upstream.forward(
            upstream.Forward(url_for(request, passthrough, spec), call_headers, sent)
        )
    except ProviderError as error:
        return error_response(wire, upstream_error(error))
    content = response.read()
    response.close()
    if response.status_code in (404, 405):  # an upstream without count_tokens: our estimate
        parsed = wire.parse(body, counting=True)
        tokens = replaced.tokens if replaced else services.request_total(parsed)
        return JsonResponse({"input_tokens": tokens})
    return _relayed_whole(response, content, {})
