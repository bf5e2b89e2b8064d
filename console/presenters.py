"""Turns into what the console shows: the user's text, the answer (or the partial output of
a turn that did not finish, labelled incomplete), each step's tool calls and results, and
the "what the model saw" breakdown of a stored context.

Plain data for the templates; every string still goes through auto-escaping there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from receipts.models import Receipt
from receipts.selectors import receipt_detail
from turns.models import Phase, UserTurn

# The token bar's sections, in the order the context is assembled (SRD 5.9).
# In the order the provider reads them: the stable (cacheable) prefix first.
SECTIONS = (
    "tools",
    "system",
    "pinned",
    "state",
    "summaries",
    "history",
    "pending",
    "retrieved",
    "user",
)
# The sections of the stable prefix (turns/context.py, docs/cost.md).
# `state` (context_strategy: state) is the state as of the last fold, sent before the turns
# since it and unchanged until the next fold (turns/state_fold.py).
STABLE_SECTIONS = frozenset(
    {"tools", "system", "pinned", "state", "summaries", "history", "pending"}
)
_SECTION_ALIASES = {
    "summaries": ("summaries",),
    "history": ("history",),
    "system": ("system", "system_instructions"),
    "pinned": ("pinned", "pinned_facts"),
    "state": ("state", "state_summary", "head_state_summary"),
    "pending": ("pending", "pending_turns"),
    "retrieved": ("retrieved", "retrieved_chunks", "memory"),
    "user": ("user", "current_user_message", "user_message"),
    "tools": ("tools",),
}


def text_of(message: dict | None) -> str:
    if not message:
        return ""
    if message.get("rendered_text"):
        return message["rendered_text"]
    return "".join(b.get("text", "") for b in message.get("blocks", []) if b.get("type") == "text")


@dataclass
class ToolCall:
    call_id: str
    name: str
    arguments: str
    output: str = ""
    is_error: bool = False


@dataclass
class StepView:
    index: int
    id: str
    provider: str
    model_id: str
    status: str
    reason: str
    usage: dict
    displayed: int
    durable: int
    calls: list[ToolCall] = field(default_factory=list)


@dataclass
class TurnView:
    turn: UserTurn
    user_text: str
    answer: str
    incomplete: bool  # an answer that stopped part-way (partial output kept)
    failed: bool
    error: dict | None
    steps: list[StepView]

    @property
    def id(self) -> str:
        return self.turn.id


def _json(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _tool_output(content) -> str:
    if isinstance(content, list):
        return "".join(
            c.get("text", "") if isinstance(c, dict) else str(c) for c in content
        ) or _json(content)
    return _json(content)


def step_view(step) -> StepView:
    outcome = step.outcome or {}
    view = StepView(
        index=step.step_index,
        id=step.id,
        provider=step.provider,
        model_id=step.model_id,
        status=outcome.get("status", ""),
        reason=outcome.get("reason") or outcome.get("code") or "",
        usage=step.usage or {},
        displayed=step.stream_displayed_bytes,
        durable=step.stream_durable_bytes,
    )
    calls: dict[str, ToolCall] = {}
    for item in step.normalized_items or []:
        kind = item.get("kind")
        if kind == "tool_call":
            call = ToolCall(
                call_id=item.get("call_id", ""),
                name=item.get("name", ""),
                arguments=_json(item.get("arguments", {})),
            )
            calls[call.call_id] = call
            view.calls.append(call)
        elif kind == "tool_output":
            call = calls.get(item.get("call_id", ""))
            if call is not None:
                call.output = _tool_output(item.get("output", ""))
    # Results travel in the next step's request (tool_result blocks in a user message).
    return view


def _attach_results(steps: list, views: list[StepView]) -> None:
    by_id = {c.call_id: c for v in views for c in v.calls}
    if not by_id:
        return
    for step in steps:
        for message in (step.request_json or {}).get("messages", [])[-1:]:
            for block in message.get("blocks", []):
                if block.get("type") == "tool_result" and block.get("tool_use_id") in by_id:
                    call = by_id[block["tool_use_id"]]
                    call.output = call.output or _tool_output(block.get("content", ""))
                    call.is_error = bool(block.get("is_error"))


def partial_output(turn: UserTurn) -> str:
    """What the client saw of a turn that never produced a final answer: the runner's
    `error` event carries it; after a crash the reconciler closes the log the same way."""
    from turns.events import read_log

    shown = []
    for event in read_log(turn.id):
        if event.event == "error" and event.data.get("partial_text"):
            return event.data["partial_text"]
        if event.event == "delta":
            shown.append(event.data.get("text", ""))
    return "".join(shown)


def turn_view(turn: UserTurn) -> TurnView:
    steps = list(turn.steps.all())
    views = [step_view(s) for s in steps]
    _attach_results(steps, views)
    final = turn.final_assistant_message
    answer = text_of(final)
    failed = turn.phase == Phase.FAILED
    incomplete = bool((final or {}).get("incomplete")) or (
        failed and any(v.status in ("incomplete", "failed", "cancelled") for v in views[-1:])
    )
    if final is None and failed:
        answer = partial_output(turn)
        incomplete = incomplete or bool(answer)
    return TurnView(
        turn=turn,
        user_text=text_of(turn.user_message),
        answer=answer,
        incomplete=incomplete,
        failed=failed,
        error=turn.error,
        steps=views,
    )


# "What the model saw" ----------------------------------------------------------------------


@dataclass
class Segment:
    name: str
    tokens: int
    percent: float

    @property
    def stable(self) -> bool:
        return self.name in STABLE_SECTIONS


def _section_tokens(sections: dict, name: str) -> int:
    for key in _SECTION_ALIASES[name]:
        if key in sections:
            try:
                return int(sections[key] or 0)
            except (TypeError, ValueError):
                return 0
    return 0


def token_bar(context: dict) -> tuple[list[Segment], int, int | None]:
    """The sections' token counts as percentages of the larger of the total and the
    budget's input allowance; also the total and that allowance."""
    sections = context.get("sections_tokens") or {}
    counts = [(name, _section_tokens(sections, name)) for name in SECTIONS]
    total = sum(n for _, n in counts)
    budget = context.get("budget") or {}
    allowance = None
    for key in ("input_limit", "input_budget", "available_tokens", "model_limit"):
        if isinstance(budget.get(key), int):
            allowance = budget[key]
            break
    scale = max(total, allowance or 0, 1)
    return [Segment(n, t, round(100 * t / scale, 3)) for n, t in counts], total, allowance


@dataclass
class Candidate:
    chunk_id: str
    text: str
    score: float | None
    packed: bool
    source: str  # provenance: turn / role / message, as the retriever gave it
    reason: str  # why it was left out, when it was


def _provenance(item: dict) -> str:
    prov = item.get("provenance") or {}
    if isinstance(prov, dict):
        parts = [f"{k} {v}" for k, v in prov.items() if v not in (None, "") and k != "text"]
        return ", ".join(parts)
    return str(prov)


def retrieval_rows(turn: UserTurn) -> list[Candidate]:
    """Every retrieval candidate of the turn in rank order, with its similarity and whether
    it was packed (the retriever's own record, memory.models.Retrieval), then chunks
    attached by hand, which the retriever never ranked."""
    from memory.archived_unit_text import hydrate_chunks
    from memory.models import Retrieval

    retrievals = list(
        Retrieval.objects.filter(turn_id=turn.pk).select_related("chunk").order_by("rank")
    )
    hydrate_chunks(r.chunk for r in retrievals)  # a unit's text may be in the archive
    rows = [
        Candidate(
            chunk_id=r.chunk_id,
            text=r.chunk.rendered_text,
            score=r.similarity,
            packed=r.packed,
            source=f"rank {r.rank}" + (f", packed as {r.packed_as}" if r.packed_as else ""),
            reason="",
        )
        for r in retrievals
    ]
    seen = {r.chunk_id for r in rows}
    for item in (turn.context or {}).get("retrieved") or []:
        chunk_id = str(item.get("chunk_id") or item.get("id") or "")
        if chunk_id in seen:
            continue
        rows.append(
            Candidate(
                chunk_id=chunk_id,
                text=item.get("text", ""),
                score=item.get("similarity", item.get("score")),
                packed=True,
                source="attached by hand" if item.get("manual") else _provenance(item),
                reason="",
            )
        )
    return rows


def timings(turn: UserTurn) -> list[tuple[str, float]]:
    """The latency breakdown recorded for the turn (milliseconds), in a stable order:
    `latency_ms` {name: ms} and the runner's `timings` {name_ms: ms}."""
    telemetry = turn.telemetry or {}
    rows: dict[str, float] = {}
    for name, value in (telemetry.get("latency_ms") or {}).items():
        if isinstance(value, (int, float)):
            rows[name.removesuffix("_ms")] = float(value)
    for name, value in (telemetry.get("timings") or {}).items():
        if isinstance(value, (int, float)):
            rows[name.removesuffix("_ms")] = float(value)
    return sorted(rows.items())


def usage_rows(steps: list[StepView]) -> list[tuple[int, str, object, object, object, object]]:
    """Per step: index, model, input and output tokens, and the provider's prompt-cache
    reads and writes (None where it did not report them)."""
    return [
        (
            s.index,
            s.model_id,
            s.usage.get("input_tokens"),
            s.usage.get("output_tokens"),
            s.usage.get("cache_read_input_tokens"),
            s.usage.get("cache_creation_input_tokens"),
        )
        for s in steps
    ]


def stable_prefix_tokens(context: dict) -> int:
    """Tokens of the context's stable prefix (what the next turn sends again unchanged)."""
    sections = context.get("sections_tokens") or {}
    return sum(_section_tokens(sections, name) for name in SECTIONS if name in STABLE_SECTIONS)


def step_receipts(steps: list[StepView]) -> list[dict]:
    """The receipt of each provider step (docs/receipts.md): what exactly was sent, item by
    item and why, with its exact replay; "what the model saw" is a view of these."""
    by_source = {
        r.source: r
        for r in Receipt.objects.filter(source__in=[f"step:{s.id}" for s in steps]).order_by("id")
    }
    out = []
    for step in steps:
        receipt = by_source.get(f"step:{step.id}")
        if receipt is not None:
            out.append({"step": step.index, **receipt_detail(receipt)})
    return out
