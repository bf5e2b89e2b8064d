"""Writes of a turn, from its acceptance to its answer. Every service owns its (short)
transaction; no provider call happens inside one or under a lock.

Lifecycle (SRD 6): TX-0 `turn_accept` -> `context.context_prepare` -> `step_start`
(responding) -> `step_progress` / `step_finish` -> TX-A `response_finalize` (or
`phases.turn_fail`) -> TX-B `branches.state_commit` (run by `jobs.summarize_turn`) -> TX-C
`jobs.index_turn`. Phase changes are compare-and-set updates (`turns/phases.py`), so a live
request and the reconciler can race and only one wins. Branch-level writes (pins, fork,
rollback, activate) are in `turns/branches.py`; "commit pending now" in `turns/jobs.py`.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from conversations.secret_guard import guard_content
from core.api.errors import InvalidInput, NotFound, PayloadTooLarge
from core.ids import new_id
from providers import blocks as B
from providers.config import default_model, model_get, require_key
from providers.errors import MissingKey, UnknownModel
from turns.branches import branch_with_conversation
from turns.errors import TurnInProgress
from turns.job_queue import job_enqueue
from turns.mirror import mirror_turn
from turns.models import (
    FINALIZED_PHASES,
    OPEN_PHASES,
    Branch,
    ContextStrategy,
    Phase,
    ProviderStep,
    Session,
    StateCheckpoint,
    StateReason,
    ToolsMode,
    UserTurn,
)
from turns.phases import advance

# How long a client should wait before re-sending a gated turn (SRD 6.2).
GATING_RETRY_AFTER_SECONDS = 1.0
USER_BLOCK_TYPES = ("text", "image", "tool_result")


def session_create(
    *,
    owner,
    title: str = "",
    default_model: str = "",
    context_strategy: str = ContextStrategy.STATE,
    tools_mode: str = ToolsMode.DISABLED,
    system_prompt: str = "",
) -> Session:
    """A session with its main branch, the branch's LCM conversation and the empty state 0
    (the branch head)."""
    if context_strategy not in ContextStrategy.values:
        raise InvalidInput(
            f"context_strategy must be one of {', '.join(ContextStrategy.values)}",
            extra={"field": "context_strategy"},
        )
    if tools_mode not in ToolsMode.values:
        raise InvalidInput(
            f"tools_mode must be one of {', '.join(ToolsMode.values)}",
            extra={"field": "tools_mode"},
        )
    if default_model:
        _model_or_error(default_model)
    with transaction.atomic(durable=True):
        session = Session.objects.create(
            owner=owner,
            title=title,
            default_model=default_model,
            context_strategy=context_strategy,
            tools_mode=tools_mode,
            system_prompt=system_prompt,
        )
        branch = branch_with_conversation(session=session, owner=owner, label="main")
        state = StateCheckpoint.objects.create(
            session=session, branch=branch, state_seq=0, reason=StateReason.INITIAL
        )
        Branch.objects.filter(pk=branch.pk).update(base_state=state, head_state=state, head_seq=0)
        Session.objects.filter(pk=session.pk).update(active_branch=branch)
    session.refresh_from_db()
    return session


# --- TX-0: acceptance --------------------------------------------------------------------


def _model_or_error(name: str):
    try:
        return model_get(name)
    except UnknownModel as error:
        # A model is a named resource (GET /models/): an unknown name is a 404, as an
        # unknown id in a body is.
        raise NotFound(
            error.message,
            code="unknown_model",
            extra={"field": "model", "configured": error.configured},
        ) from None


def resolve_model(session: Session, model: str | None):
    """The model a turn uses (explicit, else the session's, else the configured default),
    checked: unknown -> 400 listing the configured ones; missing key -> 400 naming the
    variable."""
    spec = (
        _model_or_error(model or session.default_model)
        if (model or session.default_model)
        else default_model()
    )
    try:
        require_key(spec) if spec.api_key_env else None
    except MissingKey as error:
        raise InvalidInput(
            error.message,
            code="missing_api_key",
            extra={"field": "model", "model": spec.name, "variable": error.variable},
        ) from None
    return spec


def user_message_from(content: str | list[dict]) -> dict:
    """Validate a user message (a string or a list of content blocks) into our shape."""
    limit = settings.LCM_TURN_MAX_CONTENT_CHARS
    if isinstance(content, str):
        if not content.strip():
            raise InvalidInput("content must not be empty", extra={"field": "content"})
        if len(content) > limit:
            raise PayloadTooLarge(
                f"content is {len(content)} characters; the limit is {limit}",
                extra={"field": "content", "limit": limit, "setting": "LCM_TURN_MAX_CONTENT_CHARS"},
            )
        return B.message("user", content)
    if not isinstance(content, list) or not content:
        raise InvalidInput(
            "content must be a non-empty string or a non-empty list of content blocks",
            extra={"field": "content"},
        )
    size = 0
    for index, block in enumerate(content):
        where = {"field": f"content[{index}]"}
        if not isinstance(block, dict) or block.get("type") not in USER_BLOCK_TYPES:
            raise InvalidInput(
                f"content[{index}] must be a block of type {', '.join(USER_BLOCK_TYPES)}",
                extra=where,
            )
        text = block.get("text")
        if block["type"] == "text" and (not isinstance(text, str) or not text.strip()):
            raise InvalidInput(f"content[{index}].text must be a non-blank string", extra=where)
        size += len(str(block))
    message = B.message("user", [dict(b) for b in content])
    for block in message["blocks"]:
        if block["type"] == "text":
            block.setdefault("annotations", [])
    if not message["rendered_text"].strip() and not any(
        b["type"] != "text" for b in message["blocks"]
    ):
        raise InvalidInput("content must not be empty", extra={"field": "content"})
    if size > limit:
        raise PayloadTooLarge(
            f"content is {size} characters; the limit is {limit}",
            extra={"field": "content", "limit": limit, "setting": "LCM_TURN_MAX_CONTENT_CHARS"},
        )
    return message


def turn_accept(
    *,
    session: Session,
    branch: Branch,
    content: str | list[dict],
    model: str | None = None,
    tools_mode: str | None = None,
    attach_chunk_ids: list[str] | tuple[str, ...] = (),
) -> UserTurn:
    """TX-0: persist the user message as turn `last_turn_seq + 1` (phase accepted).

    Input gating: while the branch's latest turn is before response_finalized, a new
    turn is refused with 409 and a retry hint; nothing is stored then."""
    if branch.session_id != session.pk:
        raise NotFound(f"branch {branch.pk} does not exist in session {session.pk}")
    # Secrets at ingest: masked (by the conversation's policy) before the turn stores them.
    content = guard_content(conversation_id=branch.conversation_id, content=content)
    message = user_message_from(content)
    spec = resolve_model(session, model)
    mode = tools_mode or session.tools_mode
    if mode not in ToolsMode.values:
        raise InvalidInput(
            f"tools_mode must be one of {', '.join(ToolsMode.values)}",
            extra={"field": "tools_mode"},
        )
    attached = [str(c) for c in attach_chunk_ids or ()]
    with transaction.atomic(durable=True):
        locked = Branch.objects.select_for_update().get(pk=branch.pk)
        latest = (
            UserTurn.objects.filter(branch_id=branch.pk)
            .order_by("-turn_seq")
            .values("id", "phase")
            .first()
        )
        if latest and latest["phase"] in OPEN_PHASES:
            raise TurnInProgress(latest["id"], latest["phase"], GATING_RETRY_AFTER_SECONDS)
        seq = locked.last_turn_seq + 1
        turn = UserTurn.objects.create(
            session=session,
            branch_id=branch.pk,
            turn_seq=seq,
            state_before_id=locked.head_state_id,
            phase=Phase.ACCEPTED,
            user_message=message,
            primary_provider=spec.provider,
            primary_model=spec.name,
            tools_mode=mode,
            attached_chunks=attached,
        )
        Branch.objects.filter(pk=branch.pk).update(last_turn_seq=seq)
    _mirror_after_accept(turn)
    return turn


def _mirror_after_accept(turn: UserTurn) -> None:
    # The previous turn's answer first, so the conversation keeps turn order even when
    # its own mirror (right after TX-A) has not run yet.
    previous = (
        UserTurn.objects.filter(branch_id=turn.branch_id, turn_seq=turn.turn_seq - 1)
        .select_related("branch")
        .first()
    )
    if previous is not None and previous.phase in FINALIZED_PHASES:
        mirror_turn(previous)
    mirror_turn(turn)


# --- provider steps ------------------------------------------------------------------------


def stream_path_for(step_id: str) -> str:
    return str(Path(settings.DATA_DIR) / "streams" / f"{step_id}.jsonl")


def step_start(*, turn: UserTurn, request_json: dict, provider: str, model_id: str) -> ProviderStep:
    """A new provider step (index = steps so far); phase -> responding (CAS)."""
    with transaction.atomic(durable=True):
        advance(turn, (Phase.CONTEXT_PREPARED, Phase.RESPONDING), Phase.RESPONDING)
        index = ProviderStep.objects.filter(turn=turn).count()
        step_id = new_id()
        step = ProviderStep.objects.create(
            id=step_id,
            turn=turn,
            step_index=index,
            provider=provider,
            model_id=model_id,
            request_json=request_json,
            outcome={"status": "streaming", "reason": None, "code": None, "message": None},
            stream_path=stream_path_for(step_id),
        )
    return step


def step_progress(*, step_id: str, displayed: int, durable: int) -> None:
    ProviderStep.objects.filter(pk=step_id).update(
        stream_displayed_bytes=displayed, stream_durable_bytes=durable
    )


def _response_fields(response) -> dict:
    return {
        "response_json": response.raw_response if response.raw_response is not None else {},
        "normalized_items": list(response.items or []),
        "outcome": dict(response.outcome or {}),
        "usage": dict(response.usage or {}),
        "ended_at": timezone.now(),
    }


def step_finish(*, step: ProviderStep, response, tool_results: list[dict] | None = None) -> None:
    """Record a non-final step (a tool loop continues after it). `tool_results` (the
    tool_result blocks sent back) are kept as `tool_output` transcript items."""
    fields = _response_fields(response)
    if tool_results:
        conversation_id = step.turn.branch.conversation_id
        tool_results = guard_content(conversation_id=conversation_id, content=tool_results)
    for block in tool_results or []:
        fields["normalized_items"].append(
            B.item_tool_output(block.get("tool_use_id", ""), block.get("content") or [])
            | {"is_error": bool(block.get("is_error"))}
        )
    ProviderStep.objects.filter(pk=step.pk).update(**fields)
    for name, value in fields.items():
        setattr(step, name, value)


# --- TX-A: finalization ------------------------------------------------------------------


def response_finalize(*, turn: UserTurn, step: ProviderStep, response) -> UserTurn:
    """TX-A: the final answer and the step's final record, phase -> response_finalized.
    On commit: summarize_turn is queued, and the turn is mirrored into the LCM store."""
    answer = B.message("assistant", list(response.blocks or []))
    fields = _response_fields(response)
    telemetry = dict(turn.telemetry or {})
    usage = telemetry.setdefault("usage", {"input_tokens": 0, "output_tokens": 0})
    for key in ("input_tokens", "output_tokens"):
        usage[key] = (usage.get(key) or 0) + ((response.usage or {}).get(key) or 0)
    with transaction.atomic(durable=True):
        ProviderStep.objects.filter(pk=step.pk).update(**fields)
        advance(
            turn,
            (Phase.RESPONDING,),
            Phase.RESPONSE_FINALIZED,
            final_assistant_message=answer,
            telemetry=telemetry,
        )
        job_enqueue(job_type="summarize_turn", turn=turn)
    for name, value in fields.items():
        setattr(step, name, value)
    mirror_turn(turn)
    return turn
