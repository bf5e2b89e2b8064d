"""Sending a turn, and following it as Server-Sent Events (SRD 13).

`POST /api/v1/sessions/{id}/turns/` accepts the turn (TX-0) and then either
- streams it: `stream: true` in the body, or `Accept: text/event-stream`. The turn runs on
  the runner pool, independent of this connection: a client that drops loses nothing and
  can come back with `GET /api/v1/turns/{id}/stream/` and `Last-Event-ID` (or `?after=N`);
- or runs it in the request and answers with the finished turn as JSON (201).

Events (`event:` names): `turn`, `context`, `step`, `delta`, `tool_call`, `tool_result`,
`durable`, `done`, `error`. Each has an integer `id:` increasing within the turn; the
stream ends after `done` or `error`. A `: ping` comment goes out every 15 s of silence.

Under ASGI (uvicorn, what `lcm_serve` runs) the body is an async iterator: an open stream
costs a coroutine, not a thread. Under WSGI and the test client it is a plain iterator.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import InvalidInput
from core.api.requests import NON_BLANK_PATTERN, RequestSerializer
from core.api.schema import ERRORS, WRITE_ERRORS
from core.sse import sse_comment, sse_retry
from turns import events, runner, selectors, services
from turns.apis import TurnListApi
from turns.models import OPEN_PHASES, UserTurn
from turns.serializers import TurnSerializer

SSE_MEDIA_TYPE = "text/event-stream"
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class FormatChecked:
    """`?format=` picks json or sse (DRF's URL format override); DRF would ignore an empty
    one, which the schema's enum does not allow."""

    def perform_content_negotiation(self, request, force=False):
        if not force and request.query_params.get("format") == "":
            raise InvalidInput("format must be json or sse", extra={"field": "format"})
        return super().perform_content_negotiation(request, force)


class EventStreamRenderer(BaseRenderer):
    """Lets a client ask for `text/event-stream`; errors before the stream are JSON."""

    media_type = SSE_MEDIA_TYPE
    format = "sse"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        # What this renders is JSON (an error, or a turn that was not streamed): say so.
        # The stream itself is a StreamingHttpResponse with its own type.
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = "application/json"
        return JSONRenderer().render(data)


_TEXT = {"type": "string", "pattern": NON_BLANK_PATTERN}


@extend_schema_field(
    {
        "oneOf": [
            {**_TEXT, "description": "Plain text (not blank)."},
            {
                "type": "array",
                "minItems": 1,
                "items": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {
                                "type": {"type": "string", "enum": ["text"]},
                                "text": _TEXT,
                            },
                            "required": ["type", "text"],
                            "additionalProperties": False,
                        },
                        {
                            "type": "object",
                            "properties": {
                                "type": {"type": "string", "enum": ["image", "tool_result"]}
                            },
                            "required": ["type"],
                            "additionalProperties": True,
                            "description": "An image or tool_result block, with its own fields.",
                        },
                    ]
                },
            },
        ]
    }
)
class TurnContentField(serializers.JSONField):
    """A user message: text, or a list of content blocks."""


class TurnCreateSerializer(RequestSerializer):
    content = TurnContentField(
        help_text="The user message: a string, or a list of content blocks "
        "(text, image, tool_result)."
    )
    branch_id = serializers.CharField(
        required=False, help_text="Default: the session's active branch."
    )
    model = serializers.CharField(
        required=False, help_text="A configured model name (GET /models/); default: the session's."
    )
    stream = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Answer with Server-Sent Events (also when the client accepts "
        "text/event-stream).",
    )
    tools_mode = serializers.ChoiceField(
        choices=["disabled", "parse_only", "enabled"],
        required=False,
        help_text="Default: the session's.",
    )
    attach_chunk_ids = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=list,
        help_text="Memory chunks chosen by hand (manual retrieval) to put in this turn's context.",
    )


# Each Server-Sent Event as a client parses it (the fields of one event block); `data`
# is the event's JSON document (docs/streaming.md lists them per event type).
SSE_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string", "description": "the event's payload, a JSON document"},
        "id": {"type": "string", "description": "an integer: resume after it"},
        "retry": {"type": "integer"},
    },
}
_SSE_RESPONSE = OpenApiResponse(
    response=SSE_EVENT_SCHEMA,
    description="Server-Sent Events: `turn`, `context`, `step`, `delta`, `tool_call`, "
    "`tool_result`, `durable`, `done`, `error`, each with an integer id "
    "(resume with Last-Event-ID or ?after=N).",
)


class TurnCreateApi(FormatChecked, TurnListApi):  # GET (the history) is turns/apis.py's
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        operation_id="turns_create",
        request=TurnCreateSerializer,
        responses={
            (201, "application/json"): TurnSerializer,
            (200, SSE_MEDIA_TYPE): _SSE_RESPONSE,
            **WRITE_ERRORS,
        },
        description="Send a user turn. With `stream` (or Accept: text/event-stream) the "
        "answer streams as Server-Sent Events; otherwise the finished turn comes back as "
        "JSON. 409 while the branch's previous turn is still responding.",
    )
    def post(self, request, session_id: str):
        session = selectors.session_get_for_user(user=request.user, session_id=session_id)
        body = TurnCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        turn = services.turn_accept(
            session=session,
            branch=selectors.branch_for_turn(session=session, branch_id=data.get("branch_id")),
            content=data["content"],
            model=data.get("model"),
            tools_mode=data.get("tools_mode"),
            attach_chunk_ids=data.get("attach_chunk_ids") or [],
        )
        if data.get("stream") or _accepts_event_stream(request):
            runner.start_turn(turn_id=turn.id)
            return event_stream_response(request, turn.id, after=0)
        finished = runner.run_turn(turn_id=turn.id)
        return Response(TurnSerializer(selectors.turn_detail(turn_id=finished.id)).data, status=201)


class TurnStreamApi(FormatChecked, APIView):
    # JSON first: errors before the stream (404, 400) are JSON; EventSource clients that
    # accept only text/event-stream still get them (the stream itself is not rendered).
    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        operation_id="turns_stream",
        parameters=[
            OpenApiParameter(
                "after",
                {"type": "integer", "minimum": 0},
                description="Resume after this event id (or send Last-Event-ID); default 0.",
            ),
        ],
        responses={(200, SSE_MEDIA_TYPE): _SSE_RESPONSE, **ERRORS},
        description="Follow a turn's events from the start or from an event id. A turn "
        "that already ended replays its events from the log and closes.",
    )
    def get(self, request, turn_id: str):
        turn = selectors.turn_get_for_user(user=request.user, turn_id=turn_id)
        raw = request.query_params.get("after")
        if raw is None:  # an empty `after=` is not an event id: a 400 below
            raw = request.headers.get("Last-Event-ID") or "0"
        try:
            after = int(raw)
        except ValueError:
            after = -1
        if after < 0:
            raise InvalidInput(
                "after (or Last-Event-ID) must be a non-negative integer event id",
                extra={"field": "after"},
            )
        return event_stream_response(request, turn.id, after=after)


def _accepts_event_stream(request) -> bool:
    return SSE_MEDIA_TYPE in (request.headers.get("Accept") or "")


def event_stream_response(request, turn_id: str, *, after: int) -> StreamingHttpResponse:
    if isinstance(request._request, ASGIRequest):
        body = _async_stream(turn_id, after)
    else:
        body = _sync_stream(turn_id, after)
    response = StreamingHttpResponse(body, content_type=SSE_MEDIA_TYPE)
    for name, value in _SSE_HEADERS.items():
        response[name] = value
    return response


def turn_is_over(turn_id: str) -> bool:
    """The turn ended in the database (finalized or failed): its log will grow no more
    once no live runner holds it."""
    phase = UserTurn.objects.filter(pk=turn_id).values_list("phase", flat=True).first()
    return phase is None or phase not in OPEN_PHASES


def _closing_event(turn_id: str, last_id: int) -> events.TurnEvent | None:
    """A log that ended without done/error (its process died before the reconciler ran):
    close it from the database's view, once, for every follower."""
    turn = UserTurn.objects.filter(pk=turn_id).first()
    if turn is None:
        return None
    if turn.phase == "failed":
        data = {"turn_id": turn.id, "phase": turn.phase, **(turn.error or {})}
        if (turn.final_assistant_message or {}).get("incomplete"):
            data["incomplete"] = True
            data["partial_text"] = turn.final_assistant_message.get("rendered_text", "")
        return events.append_terminal(turn_id, "error", data)
    text = (turn.final_assistant_message or {}).get("rendered_text", "")
    return events.append_terminal(
        turn_id, "done", {"turn_id": turn.id, "phase": turn.phase, "text": text}
    )


def _sync_stream(turn_id: str, after: int):
    yield sse_retry(1000)
    last = after
    terminal = False
    for item in events.follow(turn_id, after, is_finished=lambda: turn_is_over(turn_id)):
        last = item.id
        terminal = item.event in events.TERMINAL_EVENTS
        yield item.as_sse()
    if not terminal:
        closing = _closing_event(turn_id, last)
        if closing is not None and closing.id > after:
            yield closing.as_sse()


async def _async_stream(turn_id: str, after: int):
    yield sse_retry(1000)
    last = after
    terminal = False
    is_over = sync_to_async(turn_is_over)
    async for item in events.afollow(turn_id, after, is_finished=lambda: is_over(turn_id)):
        if item is None:
            yield sse_comment("ping")
            continue
        last = item.id
        terminal = item.event in events.TERMINAL_EVENTS
        yield item.as_sse()
    if not terminal:
        closing = await sync_to_async(_closing_event)(turn_id, last)
        if closing is not None and closing.id > after:
            yield closing.as_sse()
