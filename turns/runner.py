"""The runner: drives one accepted turn through its provider steps (SRD 6, 11-13).

    accepted -> context_prepared -> responding (one or more provider steps)
             -> response_finalized (TX-A)   ... then the librarian commits (TX-B) in a job

For each step it streams the provider's events into the step's journal (durability) and
the turn's event log (what clients see), with no transaction open and no lock held while
it waits on the network. Tool calls follow the turn's tools mode (SRD 12): `enabled` runs
the tools and continues with another step, up to `max_steps`; `parse_only` finalizes with
the calls shown; `disabled` treats a call as an error the client sees.

`start_turn()` runs a turn on the process's runner pool (the API's streaming requests);
`run_turn()` runs it in the calling thread (commands, tests, the non-streaming API).
`shutdown()` asks running turns to stop at their next event: each ends `incomplete` with
its partial output kept, and the head never advances from it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connection

from core.tool_result import ToolResult
from providers.base import (
    Finished,
    ProviderRequest,
    ProviderResponse,
    RawEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStart,
    outcome,
)
from providers.blocks import message as make_message
from providers.caching import CachePlan, prompt_cache_key
from providers.config import engine_config, model_get
from providers.errors import ProviderError
from providers.registry import provider_for
from receipts.context import call_context
from receipts.items import ItemRef
from turns import events, metrics, services
from turns.context import AssembledContext, context_prepare
from turns.journal import StreamJournal, recover_step
from turns.memory_port import turn_memory
from turns.models import ProviderStep, ToolsMode, UserTurn
from turns.phases import turn_fail

logger = logging.getLogger(__name__)

CACHE_USAGE_KEYS = ("cache_read_input_tokens", "cache_creation_input_tokens")
# An `incomplete` stream with one of these reasons is still a complete answer as far as
# the model is concerned (it ran out of room), so the turn is finalized with it; any other
# incomplete stream (a dropped connection, a shutdown) fails the turn, keeping the output.
_FINALIZABLE_INCOMPLETE = {"max_tokens", "max_output_tokens", "model_context_window_exceeded"}

_shutting_down = threading.Event()
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
_running: set[str] = set()
_running_lock = threading.Lock()


class _Stopped(Exception):
    """The process is shutting down: end the current step where it is."""


def max_steps() -> int:
    return settings.LCM_TURN_MAX_STEPS


def start_turn(*, turn_id: str) -> Future:
    """Run the turn on the runner pool; the future resolves to the finished UserTurn."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max_workers=settings.LCM_TURN_THREADS,
                thread_name_prefix="lcm-turn",
            )
        # Open the event log now, so a subscriber that comes before the thread starts
        # finds a live channel instead of an empty file.
        events.open_channel(turn_id)
        return _pool.submit(_run_in_pool, turn_id)


def _run_in_pool(turn_id: str) -> UserTurn:
    close_old_connections()
    try:
        return run_turn(turn_id=turn_id)
    finally:
        connection.close()  # pool threads are reused: give the connection back


def running_turns() -> list[str]:
    with _running_lock:
        return sorted(_running)


def shutdown(timeout: float = 5.0) -> list[str]:
    """Stop taking turns and end the running ones within `timeout` seconds.
    Returns the ids of turns still running when the time ran out."""
    _shutting_down.set()
    deadline = time.monotonic() + timeout
    while running_turns() and time.monotonic() < deadline:
        time.sleep(0.05)
    return running_turns()


def run_turn(*, turn_id: str) -> UserTurn:
    """Run an accepted turn to its end (finalized or failed) and return it."""
    turn = UserTurn.objects.select_related("session", "branch").get(pk=turn_id)
    channel = events.open_channel(turn_id)
    with _running_lock:
        _running.add(turn_id)
    try:
        return _TurnRun(turn, channel).run()
    finally:
        with _running_lock:
            _running.discard(turn_id)
        if not channel.finished:  # a bug path: never leave a subscriber hanging
            _publish(channel, "error", {"code": "internal_error", "message": "turn aborted"})


def _publish(channel: events.TurnChannel, event: str, data: dict) -> None:
    # A late durable notice may arrive after the log closed: nothing to tell anyone then.
    with contextlib.suppress(ValueError):
        channel.publish(event, data)


class _TurnRun:
    def __init__(self, turn: UserTurn, channel: events.TurnChannel) -> None:
        self.turn = turn
        self.channel = channel
        self.timings: dict[str, float] = {}
        self.cache_steps: list[dict] = []
        self.context: AssembledContext | None = None

    # The whole turn ------------------------------------------------------------------

    def run(self) -> UserTurn:
        turn = self.turn
        self.publish("turn", _turn_header(turn))
        if _shutting_down.is_set():
            return self.fail("server_shutdown", "the server is shutting down; send it again")
        context = self.prepare_context()
        if context is None:  # the turn is failed
            return self.turn
        self.context = context
        try:
            spec = model_get(turn.primary_model)
            provider = provider_for(spec)
        except Exception as error:
            return self.fail(getattr(error, "code", "model_unavailable"), str(error))
        return self.run_steps(spec, provider, context)

    def prepare_context(self) -> AssembledContext | None:
        """The turn's context (phase context_prepared), announced to the client; None when
        it could not be prepared (the turn is failed then)."""
        started = time.monotonic()
        try:
            context = context_prepare(turn=self.turn)
        except Exception as error:  # ContextTooLarge and friends carry code and message
            logger.info("turn %s: context not prepared: %s", self.turn.id, error)
            self.fail(
                getattr(error, "code", "context_error"),
                str(getattr(error, "message", error)),
                extra=getattr(error, "extra", None),
            )
            return None
        self.timings["assemble_ms"] = _ms(started)
        self.publish(
            "context",
            {
                "sections_tokens": context.sections_tokens,
                "budget": context.budget,
                "shrink_steps": context.shrink_steps,
                "retrieved": len(context.retrieved),
            },
        )
        return context

    def run_steps(self, spec, provider, context: AssembledContext) -> UserTurn:
        """One provider step after another, while the model calls tools the turn may run."""
        tools = self.tool_definitions()
        messages = context.to_request_messages()
        cache = CachePlan(
            system_parts=tuple(context.system_parts),
            stable_messages=context.stable_messages,
            key=prompt_cache_key(self.turn.branch_id),
            marked_parts=context.marked_parts,
        )
        for step_index in range(max_steps()):
            request = ProviderRequest(
                model=spec,
                system=context.system,
                messages=messages,
                tools=tools,
                max_output_tokens=max_output(spec, context),
                options=self.request_options(spec, tools),
                purpose="turn",
                conversation_id=self.turn.branch.conversation_id,
                cache=cache,
            )
            step = services.step_start(
                turn=self.turn,
                request_json=_request_record(request, step_index),
                provider=spec.provider,
                model_id=spec.model_id,
            )
            response = self.stream_step(provider, request, step, step_index)
            if response is None:  # failed before the first byte; the turn is failed
                return self.turn
            self.count_cache(spec, response)
            calls = [b for b in response.blocks if b.get("type") == "tool_use"]
            if not (response.status == "paused" and calls):
                return self.end_with(step, response)
            refused = self.refuse_tool_calls(step, response, calls, step_index)
            if refused is not None:
                return refused
            results = self.run_tools(calls, step_index)
            services.step_finish(step=step, response=response, tool_results=results)
            messages = [
                *messages,
                make_message("assistant", response.blocks),
                make_message("user", results),
            ]
        raise AssertionError(
            "unreachable: the last step refuses more tool calls"
        )  # pragma: no cover

    def receipt_context(self, step):
        """What the step's receipt says the request was built from (docs/receipts.md)."""
        context = self.context
        return call_context(
            site="turn",
            conversation_id=self.turn.branch.conversation_id,
            items=[
                ItemRef(
                    kind=r["kind"],
                    id=r["id"],
                    reason=r.get("reason", "history"),
                    score=r.get("score"),
                    tokens=r.get("tokens"),
                )
                for r in (context.receipt_refs() if context else [])
            ],
            source=f"step:{step.id}",
            budget={
                k: v
                for k, v in (context.budget if context else {}).items()
                if k in ("input_limit", "lcm_room")
            },
            query=(self.turn.user_message or {}).get("rendered_text", "")[:200]
            if context and context.retrieved
            else "",
            notes={"strategy": context.strategy} if context else {},
        )

    def refuse_tool_calls(
        self, step: ProviderStep, response: ProviderResponse, calls: list[dict], step_index: int
    ) -> UserTurn | None:
        """The turn's end when its tools mode (or the step limit) does not let the runner
        run the model's tool calls; None when it may run them."""
        mode = self.turn.tools_mode
        if mode == ToolsMode.DISABLED:
            services.step_finish(step=step, response=response)
            names = ", ".join(sorted({c.get("name", "") for c in calls}))
            return self.fail(
                "tool_call_in_disabled_mode",
                f"the model called a tool ({names}) but tools are disabled for this turn",
                step=step,
            )
        if mode == ToolsMode.PARSE_ONLY:
            return self.finalize(step, response)
        if step_index + 1 >= max_steps():
            services.step_finish(step=step, response=response)
            return self.fail(
                "tool_step_limit",
                f"the model kept calling tools past {max_steps()} steps (LCM_TURN_MAX_STEPS)",
                step=step,
            )
        return None

    def end_with(self, step: ProviderStep, response: ProviderResponse) -> UserTurn:
        """The last step's answer: finalized when it is complete (or cut only by the
        model's own limits), else the turn fails keeping the partial output."""
        status = response.status
        if status == "completed" or status == "paused":
            return self.finalize(step, response)
        if status == "incomplete" and response.outcome.get("reason") in _FINALIZABLE_INCOMPLETE:
            return self.finalize(step, response)
        services.step_finish(step=step, response=response)
        out = response.outcome
        return self.fail(
            out.get("code") or status,
            out.get("message") or out.get("reason") or f"the provider stream ended {status}",
            step=step,
            partial_blocks=response.blocks,
        )

    # One provider step ---------------------------------------------------------------

    def stream_step(self, provider, request, step, step_index) -> ProviderResponse | None:
        """Stream one provider call into the step's journal and the turn's event log; its
        response (what the journal kept, when the stream ended without one), or None when
        the provider failed (the turn is failed then)."""
        self.publish("step", {"step": step_index, "id": step.id, "status": "streaming"})
        started = time.monotonic()
        try:
            with self.journal(step, step_index) as journal, self.receipt_context(step):
                response = self.pump(provider.stream(request), journal, step, step_index, started)
        except ProviderError as error:
            self.fail(error.code, str(error), step=step)
            return None
        except _Stopped:
            response = _recovered_response(
                step,
                request,
                outcome(
                    "incomplete",
                    reason="server_shutdown",
                    code="server_shutdown",
                    message="the server shut down while the answer streamed",
                ),
            )
        if response is None:  # an adapter that ended without Finished: a bug, kept visible
            response = _recovered_response(
                step, request, outcome("failed", code="stream_ended", message="no final event")
            )
        self.timings["stream_ms"] = self.timings.get("stream_ms", 0.0) + _ms(started)
        self.publish(
            "step",
            {
                "step": step_index,
                "id": step.id,
                "status": response.status,
                "outcome": response.outcome,
                "usage": response.usage,
            },
        )
        return response

    @contextlib.contextmanager
    def journal(self, step: ProviderStep, step_index: int) -> Iterator[StreamJournal]:
        """The step's journal, closed (fsynced) however the stream ends; a provider error
        or a shutdown is written into it first, so a recovery reads why it stopped."""
        runner_thread = threading.current_thread()

        def on_durable(displayed: int, durable: int) -> None:
            # The flusher thread only announces; the step row is written from the runner's
            # own thread (its connection): every 2 s while streaming, and at the end.
            if threading.current_thread() is runner_thread:
                services.step_progress(step_id=step.id, displayed=displayed, durable=durable)
            _publish(
                self.channel,
                "durable",
                {"step": step_index, "displayed": displayed, "durable": durable},
            )

        journal = StreamJournal(step_id=step.id, provider=step.provider, on_durable=on_durable)
        try:
            yield journal
        except ProviderError as error:
            journal.write("lcm.error", {"code": error.code, "message": str(error)})
            raise
        except _Stopped:
            journal.write("lcm.error", {"code": "server_shutdown", "message": "shutting down"})
            raise
        finally:
            journal.close()  # fsync; on_durable records and announces the final byte counts

    def pump(self, stream, journal: StreamJournal, step, step_index: int, started: float):
        """Each provider event into the journal (and what the client sees into the event
        log); the stream's final response, None when it ended without one."""
        progress_written = started
        response = None
        for event in stream:
            if _shutting_down.is_set():
                raise _Stopped
            if time.monotonic() - progress_written >= 2.0:
                progress_written = time.monotonic()
                services.step_progress(
                    step_id=step.id, displayed=journal.displayed, durable=journal.durable
                )
            if isinstance(event, Finished):
                response = event.response
            else:
                self.record(event, journal, step_index, started)
        return response

    def record(self, event, journal: StreamJournal, step_index: int, started: float) -> None:
        """One streamed event: journaled, and published when the client shows it."""
        if isinstance(event, RawEvent):
            journal.write(event.event_type, event.payload)
        elif isinstance(event, TextDelta):
            if "first_byte_ms" not in self.timings:
                self.timings["first_byte_ms"] = _ms(started)
            journal.write("lcm.text", {"index": event.index, "text": event.text}, shown=event.text)
            self.publish("delta", {"step": step_index, "index": event.index, "text": event.text})
        elif isinstance(event, ToolCallStart):
            call = {"index": event.index, "call_id": event.call_id, "name": event.name}
            journal.write("lcm.tool_call", call)
            self.publish("tool_call", {"step": step_index, **call})
        elif isinstance(event, ToolCallDelta):
            journal.write(
                "lcm.tool_input",
                {"index": event.index, "partial_json": event.partial_json},
                shown=event.partial_json,
            )

    # Tools -----------------------------------------------------------------------------

    def tool_definitions(self) -> list[dict]:
        memory = turn_memory()
        if self.turn.tools_mode == ToolsMode.DISABLED or memory is None:
            return []
        return memory.tool_definitions(self.turn.tools_mode)

    def request_options(self, spec, tools: list[dict]) -> dict:
        options: dict = {}
        if tools:
            options["parallel_tool_calls"] = engine_config().tools.allow_parallel
        if spec.provider == "offline":
            options["offline_chunks"] = settings.LCM_OFFLINE_STREAM_CHUNKS
            options["offline_delay_seconds"] = settings.LCM_OFFLINE_STREAM_DELAY_MS / 1000
        return options

    def run_tools(self, calls: list[dict], step_index: int) -> list[dict]:
        """Execute each call in order; the results, in the same order, as tool_result blocks."""
        memory = turn_memory()
        results = []
        for call in calls:
            started = time.monotonic()
            try:
                if memory is None:
                    raise RuntimeError("no tools are installed (the memory app is missing)")
                result = memory.execute_tool(
                    name=call.get("name", ""), input=call.get("input") or {}, turn=self.turn
                )
            except Exception as error:  # a tool must never take the turn down
                logger.exception("tool %s failed", call.get("name"))
                result = ToolResult.error(f"tool error: {error}")
            content = result.content
            blocks = (
                content
                if isinstance(content, list)
                else [{"type": "text", "text": str(content), "annotations": []}]
            )
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": call.get("id", ""),
                    "content": blocks,
                    "is_error": result.is_error,
                }
            )
            self.publish(
                "tool_result",
                {
                    "step": step_index,
                    "call_id": call.get("id", ""),
                    "name": call.get("name", ""),
                    "is_error": result.is_error,
                    "ms": _ms(started),
                },
            )
        return results

    # Endings ---------------------------------------------------------------------------

    def count_cache(self, spec, response: ProviderResponse) -> None:
        """The step's cache usage: into the turn's telemetry (summed over its steps, and
        per step) and the process's Prometheus counters."""
        spent = response.usage or {}
        step_cache = {key: spent.get(key) for key in CACHE_USAGE_KEYS}
        self.cache_steps.append(step_cache)
        metrics.count_cache_tokens(spec.provider, spec.name, step_cache)

    def finalize(self, step, response: ProviderResponse) -> UserTurn:
        telemetry = dict(self.turn.telemetry or {})
        telemetry["latency_ms"] = {**telemetry.get("latency_ms", {}), **self.timings}
        telemetry["cache"] = {
            **{key: sum(s.get(key) or 0 for s in self.cache_steps) for key in CACHE_USAGE_KEYS},
            "steps": list(self.cache_steps),
        }
        self.turn.telemetry = telemetry  # written by TX-A with the answer
        self.turn = services.response_finalize(turn=self.turn, step=step, response=response)
        self.publish(
            "done",
            {
                **_turn_header(self.turn),
                "outcome": response.outcome,
                "usage": response.usage,
                "text": _text_of(response.blocks),
                "timings": self.timings,
            },
        )
        return self.turn

    def fail(
        self, code, message, *, step=None, partial_blocks: list[dict] | None = None, extra=None
    ) -> UserTurn:
        self.turn = turn_fail(
            turn=self.turn, code=code, message=message, step=step, partial_blocks=partial_blocks
        )
        partial = _text_of(partial_blocks or [])
        data = {"code": code, "message": message, "turn_id": self.turn.id, "phase": self.turn.phase}
        if partial:
            data["partial_text"] = partial
            data["incomplete"] = True
        if extra:
            data["extra"] = extra
        self.publish("error", data)
        return self.turn

    def publish(self, event: str, data: dict) -> None:
        _publish(self.channel, event, data)


def _turn_header(turn: UserTurn) -> dict:
    return {
        "turn_id": turn.id,
        "turn_seq": turn.turn_seq,
        "session_id": turn.session_id,
        "branch_id": turn.branch_id,
        "phase": turn.phase,
        "model": turn.primary_model,
    }


def _request_record(request: ProviderRequest, step_index: int) -> dict:
    """The neutral request as stored on the step before the call (no key, no headers);
    the adapter's wire request is added to the step when it finishes."""
    return {
        "step_index": step_index,
        "provider": request.model.provider,
        "model": request.model.name,
        "model_id": request.model.model_id,
        "system": request.system,
        "messages": request.messages,
        "tools": request.tools,
        "max_output_tokens": request.max_output_tokens,
        "options": request.options,
    }


def _recovered_response(step, request: ProviderRequest, stream_outcome: dict) -> ProviderResponse:
    """A step whose stream ended without a final event, as a response: the output its
    journal kept (read back after it closed) with `stream_outcome`."""
    recovered = recover_step(step)
    return ProviderResponse(
        raw_request={},
        raw_response=None,
        blocks=recovered.blocks,
        items=[],
        outcome=stream_outcome,
        usage={"input_tokens": None, "output_tokens": None},
        model=request.model.model_id,
    )


def _text_of(blocks: list[dict]) -> str:
    return "".join(b.get("text", "") for b in blocks if b.get("type") == "text")


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 2)


def max_output(spec, context: AssembledContext) -> int:
    """The request's `max_tokens`: the model's output limit, but no more than the window
    leaves after the input and the safety margin, so that input plus output never exceed
    `context_limit` on a small window (the assembled input is at most the window less the
    response reserve and the margin, so at least the reserve is always left)."""
    margin = engine_config().budget.safety_margin_tokens
    left = spec.context_limit - margin - context.token_total()
    return max(1, min(spec.max_output_tokens, left))
