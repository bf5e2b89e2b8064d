"""The compaction engine: leaf and condensed passes over a conversation's active context.

Lifecycle of a run (docs/compaction.md):
1. claim the conversation's compaction lease (a `running` CompactionRun row, unique per
   conversation; a second run gets a retryable `Conflict`);
2. per pass: plan under the advisory lock (read the context, pick a range), summarize
   with NO transaction open (escalation: normal -> aggressive -> fallback), then apply in
   one short transaction that re-checks the planned range (`compaction.store`);
3. stop when nothing is eligible, a pass cannot save tokens, or the pass / time bounds
   are reached; record the outcome on the run.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from compaction import escalation, fidelity
from compaction.models import CompactionRun, Mode, Reason, RunStatus
from compaction.planning import (
    Candidate,
    Row,
    condensed_candidate,
    context_rows,
    leaf_candidate,
    raw_tokens_outside_tail,
)
from compaction.store import (
    Applied,
    CompactionEvent,
    NewSummary,
    RangeChanged,
    after_summary_hooks_once,
    apply_summary,
    summary_id_for,
)
from compaction.summarizers import SourceItem, Summarizer, SummarizerAuthError, default_summarizer
from compaction.tail_outputs import FreshTail
from conversations.models import (
    ContextItem,
    Conversation,
    ItemType,
    Message,
    Summary,
    SummaryKind,
)
from core import locks, shutdown
from core.api.errors import Conflict, InvalidInput, NotFound
from core.leases import lease_deadline, lease_kept
from largefiles import find_file_ids

logger = logging.getLogger("lcm.compaction")

# A crashed worker's lease is taken over once it is this much older than the time bound.
_LEASE_GRACE_SECONDS = 60
# A pass whose range changed is re-planned; past this many times the run stops.
_MAX_REPLANS = 5


@dataclass
class CompactionResult:
    status: Literal["compacted", "nothing_to_do", "failed"]
    summaries_created: list[str]
    tokens_before: int
    tokens_after: int
    passes: int
    run_id: int | None
    detail: str
    error_code: str | None = None  # "summarizer_auth" when the provider refused the key
    levels: dict[str, int] = field(default_factory=dict)  # escalation level -> summaries

    def as_dict(self) -> dict:
        return asdict(self)


def summarizer_from_settings() -> Summarizer:
    return default_summarizer(
        model=settings.LCM_SUMMARY_MODEL,
        timeout=settings.LCM_SUMMARY_TIMEOUT_SECONDS,
        max_retries=settings.LCM_SUMMARY_MAX_RETRIES,
        provider_model=settings.LCM_SUMMARY_PROVIDER_MODEL,
    )


def _context_tokens(conversation_id: int) -> int:
    return (
        ContextItem.objects.filter(conversation_id=conversation_id).aggregate(
            tokens=Sum("token_count")
        )["tokens"]
        or 0
    )


def _file_ids(parts: list[tuple[list | None, str]]) -> list[str]:
    """File ids recorded on the sources, then any mentioned in their text, first-seen order."""
    seen: dict[str, None] = {}
    for recorded, text in parts:
        for file_id in recorded or ():
            seen.setdefault(file_id, None)
        if "file_" in text:  # the regex is the pass's costliest line otherwise
            for file_id in find_file_ids(text):
                seen.setdefault(file_id, None)
    return list(seen)


_SOURCE_COLUMNS = ("id", "seq", "role", "content", "created_at", "token_count", "file_ids")


def _source_messages(conversation_id: int, ids: list[int]) -> list[dict]:
    """A leaf's source messages (a chunk of ~250 on the reference workload), read with one
    raw statement: Django's per-row converters (datetime parsing, JSON decoding of mostly
    empty `file_ids`) cost more than the query."""
    sql = (
        f"SELECT {', '.join(_SOURCE_COLUMNS)} FROM {Message._meta.db_table}"
        f" WHERE conversation_id = %s AND id IN ({', '.join(['%s'] * len(ids))})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [conversation_id, *ids])
        rows = cursor.fetchall()
    sqlite = connection.vendor == "sqlite"
    out = []
    for row in rows:
        m = dict(zip(_SOURCE_COLUMNS, row, strict=True))
        if sqlite:  # naive UTC, as Django stores it
            at = m["created_at"]
            at = datetime.fromisoformat(at) if isinstance(at, str) else at
            m["created_at"] = at.replace(tzinfo=UTC) if at.tzinfo is None else at
        files = m["file_ids"]
        if isinstance(files, str):
            m["file_ids"] = [] if files == "[]" else json.loads(files)
        out.append(m)
    return out


def log_event(event: str, **fields) -> None:
    """A structured log line: the event, then key=value pairs (also passed as `extra`)."""
    pairs = " ".join(f"{key}={value}" for key, value in fields.items())
    logger.info("%s %s", event, pairs, extra=fields)


class CompactionEngine:
    """One run over one conversation. `run_mode()` drives the passes for the requested mode."""

    def __init__(
        self,
        *,
        conversation: Conversation,
        mode: str,
        reason: str,
        target_tokens: int | None,
        summarizer: Summarizer,
    ) -> None:
        self.conversation = conversation
        self.mode = mode
        self.reason = reason
        self.target_tokens = target_tokens
        self.summarizer = summarizer
        self.summary_ids: list[str] = []
        self.levels: dict[str, int] = {}
        self.kinds: dict[str, int] = {}
        self.replans = 0
        self.notes: list[str] = []
        self.passes = 0
        self.started = time.monotonic()
        self.stop_reason = ""
        self.run: CompactionRun | None = None
        self.stop_under: int | None = None  # an until_under run's target (see _pass_target)
        self._rows: list[Row] | None = None
        self._tail = FreshTail(conversation.token_budget)
        self._contents: dict[str, str | None] = {}

    # --- bounds -------------------------------------------------------------------
    def _out_of_budget(self) -> bool:
        if self.passes >= settings.LCM_COMPACTION_MAX_PASSES:
            self.stop_reason = f"pass limit reached ({settings.LCM_COMPACTION_MAX_PASSES})"
            return True
        if time.monotonic() - self.started >= settings.LCM_COMPACTION_MAX_SECONDS:
            self.stop_reason = f"time limit reached ({settings.LCM_COMPACTION_MAX_SECONDS} s)"
            return True
        return False

    # --- planning -----------------------------------------------------------------
    def rows(self) -> list[Row]:
        """The context as this run last saw it. Read under the advisory lock once, then kept
        up to date in memory after each apply: while the run holds the lease only appends
        (at the end) change the context, and an apply re-checks its range anyway."""
        if self._rows is None:
            with transaction.atomic():
                locks.lock(locks.LockKind.COMPACTION, self.conversation.pk)
                self._rows = context_rows(self.conversation.pk)
        return self._rows

    def _replace_rows(self, candidate: Candidate, summary_row: Row) -> None:
        rows = self.rows()
        start = rows.index(candidate.rows[0])
        rows[start : start + len(candidate.rows)] = [summary_row]

    def plan(self, kind: str, *, max_depth: int | None = None, fanout: int | None = None):
        """Pick the next range (pure, over `rows()`)."""
        rows = self.rows()
        tail_start = self._tail.start(rows)
        if kind == "leaf":
            return leaf_candidate(rows, tail_start, settings.LCM_LEAF_CHUNK_TOKENS)
        return condensed_candidate(
            rows,
            tail_start,
            leaf_fanout=fanout or settings.LCM_LEAF_MIN_FANOUT,
            condensed_fanout=fanout or settings.LCM_CONDENSED_MIN_FANOUT,
            chunk_tokens=settings.LCM_LEAF_CHUNK_TOKENS,
            max_depth=max_depth,
        )

    def context_tokens(self) -> int:
        return sum(row.token_count for row in self.rows())

    def raw_outside_tail(self) -> int:
        rows = self.rows()
        return raw_tokens_outside_tail(rows, self._tail.start(rows))

    # --- one pass -----------------------------------------------------------------
    def _previous_context(self, summary_id: str | None) -> str | None:
        if summary_id is None:
            return None
        if summary_id not in self._contents:  # summaries this run wrote are remembered
            self._contents[summary_id] = (
                Summary.objects.filter(pk=summary_id).values_list("content", flat=True).first()
            )
        return self._contents[summary_id]

    def _leaf_summary(self, candidate: Candidate) -> tuple[NewSummary, list[SourceItem], int]:
        ids = [row.message_id for row in candidate.rows]
        by_id = {m["id"]: m for m in _source_messages(self.conversation.pk, ids)}
        messages = [by_id[i] for i in ids]
        sources = [
            SourceItem(
                ref=f"msg:{m['seq']}",
                kind="message",
                content=m["content"],
                created_at=m["created_at"],
                role=m["role"],
            )
            for m in messages
        ]
        tokens = sum(m["token_count"] for m in messages)
        draft = NewSummary(
            id=summary_id_for(
                conversation_id=self.conversation.pk, kind="leaf", depth=0, sources=ids
            ),
            conversation_id=self.conversation.pk,
            kind=SummaryKind.LEAF,
            depth=0,
            level="",
            content="",
            token_count=0,
            earliest_at=min(m["created_at"] for m in messages),
            latest_at=max(m["created_at"] for m in messages),
            descendant_count=0,
            descendant_token_count=tokens,
            source_token_count=tokens,
            model="",
            file_ids=_file_ids([(m["file_ids"], m["content"]) for m in messages]),
            message_ids=ids,
        )
        return draft, sources, messages[-1]["id"]

    def _condensed_summary(self, candidate: Candidate) -> tuple[NewSummary, list[SourceItem]]:
        ids = [row.summary_id for row in candidate.rows]
        by_id = {
            s["id"]: s
            for s in Summary.objects.filter(pk__in=ids).values(
                "id",
                "content",
                "earliest_at",
                "latest_at",
                "token_count",
                "descendant_count",
                "descendant_token_count",
                "file_ids",
            )
        }
        parents = [by_id[i] for i in ids]
        sources = [
            SourceItem(
                ref=s["id"],
                kind="summary",
                content=s["content"],
                created_at=s["earliest_at"],
                latest_at=s["latest_at"],
            )
            for s in parents
        ]
        draft = NewSummary(
            id=summary_id_for(
                conversation_id=self.conversation.pk,
                kind="condensed",
                depth=candidate.depth,
                sources=ids,
            ),
            conversation_id=self.conversation.pk,
            kind=SummaryKind.CONDENSED,
            depth=candidate.depth,
            level="",
            content="",
            token_count=0,
            earliest_at=min(s["earliest_at"] for s in parents),
            latest_at=max(s["latest_at"] for s in parents),
            descendant_count=sum(1 + s["descendant_count"] for s in parents),
            descendant_token_count=sum(s["descendant_token_count"] for s in parents),
            source_token_count=sum(s["token_count"] for s in parents),
            model="",
            file_ids=_file_ids([(s["file_ids"], s["content"]) for s in parents]),
            parent_ids=ids,
        )
        return draft, sources

    def run_pass(self, candidate: Candidate) -> bool:
        """Summarize and apply one candidate. True if it saved tokens."""
        shutdown.raise_if_requested()  # a stopping worker ends between passes, never inside
        if candidate.kind == "leaf":
            draft, sources, newest_message_id = self._leaf_summary(candidate)
            target = self._pass_target(candidate, settings.LCM_LEAF_TARGET_TOKENS)
            drawn = fidelity.leaf_handles(sources)
        else:
            draft, sources = self._condensed_summary(candidate)
            newest_message_id = None
            target = self._pass_target(candidate, settings.LCM_CONDENSED_TARGET_TOKENS)
            drawn = fidelity.condensed_handles(sources)
        try:
            outcome = escalation.summarize(
                summarizer=self.summarizer,
                sources=sources,
                source_tokens=candidate.source_tokens,
                depth=candidate.depth,
                target_tokens=target,
                previous_context=self._previous_context(candidate.previous_summary_id),
                conversation_id=self.conversation.pk,
                handles=drawn.handles,
            )
        except escalation.NoProgress as error:
            self.stop_reason = f"a {candidate.kind} pass could not shrink its sources ({error})"
            return False
        summary = replace(
            draft,
            level=outcome.level,
            content=outcome.content,
            token_count=outcome.token_count,
            model=outcome.model[:255],
        )
        measured = fidelity.measure_summary(outcome.content, drawn, outcome.path)

        def on_applied(row: Summary) -> None:
            self._record_on_run(row)
            fidelity.record(row, measured)

        try:
            applied = apply_summary(
                summary=summary,
                planned_item_ids=[row.item_id for row in candidate.rows],
                event=self._compaction_event(summary, newest_message_id, candidate, outcome),
                on_applied=on_applied,
            )
        except RangeChanged as error:
            return self._replan(error)
        self.passes += 1
        if applied.already_applied:
            self._rows = None
            self.notes.append(f"{summary.id} was already applied")
            return True
        self._remember(candidate, summary, applied, outcome)
        return True

    def _pass_target(self, candidate: Candidate, base: int) -> int:
        """The level's target, except for the pass of a requested `until_under` run that
        brings the context under the run's target: that summary may use the room left under
        it (it is what the model will read of its span, so more of the span's handles
        survive). The room is always less than the candidate's sources while the context is
        over. Not for automatic runs: their target is the low-water mark, whose headroom is
        what keeps the next turns' prefix unchanged (docs/cost.md); filling it would bring
        the next compaction within a few turns."""
        if self.stop_under is None or self.reason != Reason.MANUAL:
            return base
        room = self.stop_under - (self.context_tokens() - candidate.source_tokens)
        return room if base < room < candidate.source_tokens else base

    def _run_id(self) -> int | None:
        return self.run.pk if self.run else None

    def _compaction_event(
        self,
        summary: NewSummary,
        newest_message_id: int | None,
        candidate: Candidate,
        outcome: escalation.Outcome,
    ) -> CompactionEvent | None:
        """The compaction marker a leaf pass leaves on its newest source message."""
        if newest_message_id is None:
            return None
        return CompactionEvent(
            message_id=newest_message_id,
            session_id=self.conversation.session_id,
            automatic=self.reason != Reason.MANUAL,
            metadata={
                "summary_id": summary.id,
                "compaction_run_id": self._run_id(),
                "trigger_reason": self.reason,
                "source_message_count": len(summary.message_ids),
                "token_before": candidate.source_tokens,
                "token_after": summary.token_count,
                "level": outcome.level,
            },
        )

    def _record_on_run(self, row: Summary) -> None:
        """In the apply's transaction: the run row lists the summary (a crash keeps it)."""
        run_id = self._run_id()
        if run_id is not None:
            CompactionRun.objects.filter(pk=run_id).update(
                summary_ids=[*self.summary_ids, row.pk], passes=self.passes + 1
            )

    def _replan(self, error: RangeChanged) -> bool:
        """Nothing was written: forget the rows so the next plan sees the current context,
        unless the context has changed under the plan too often."""
        self._rows = None
        self.replans += 1
        self.notes.append(f"re-planned: {error}")
        if self.replans > _MAX_REPLANS:
            self.stop_reason = f"the context kept changing under the plan ({error})"
            return False
        return True

    def _remember(
        self,
        candidate: Candidate,
        summary: NewSummary,
        applied: Applied,
        outcome: escalation.Outcome,
    ) -> None:
        """Keep the in-memory context and the run's tallies in step with what was applied."""
        self._replace_rows(
            candidate,
            Row(
                applied.item_id,
                applied.ordinal,
                ItemType.SUMMARY,
                None,
                summary.id,
                summary.token_count,
                None,
                summary.depth,
            ),
        )
        self.summary_ids.append(summary.id)
        self._contents = {summary.id: summary.content}
        self.levels[outcome.level] = self.levels.get(outcome.level, 0) + 1
        self.kinds[summary.kind] = self.kinds.get(summary.kind, 0) + 1
        if len(outcome.attempts) > 1 or "stand-in" in outcome.attempts[0]:
            self.notes.append(f"{summary.id}: " + "; ".join(outcome.attempts))
        log_event(
            "summary created",
            **{
                "conversation_id": self.conversation.pk,
                "session_id": self.conversation.session_id,
                "compaction_id": self._run_id(),
                "summary_id": summary.id,
                "trigger_reason": self.reason,
                "token_before": candidate.source_tokens,
                "token_after": summary.token_count,
                "kind": summary.kind,
                "depth": summary.depth,
                "level": outcome.level,
            },
        )

    # --- modes ----------------------------------------------------------------------
    def _passes_of(self, kind: str, *, max_depth=None, fanout=None, stop_under=None) -> int:
        """Repeat passes of one kind while eligible; returns how many summaries were made."""
        made = 0
        while not self._out_of_budget():
            if stop_under is not None and self.context_tokens() <= stop_under:
                break
            candidate = self.plan(kind, max_depth=max_depth, fanout=fanout)
            if candidate is None:
                break
            before = len(self.summary_ids)
            if not self.run_pass(candidate):
                break
            made += len(self.summary_ids) - before
        return made

    def full_sweep(self, *, fanout=None, stop_under=None) -> int:
        made = self._passes_of("leaf", stop_under=stop_under)
        made += self._passes_of("condensed", fanout=fanout, stop_under=stop_under)
        return made

    def incremental(self) -> int:
        outside = self.raw_outside_tail()
        if outside <= settings.LCM_LEAF_CHUNK_TOKENS:
            self.stop_reason = (
                f"{outside} raw tokens outside the fresh tail, not over one leaf chunk "
                f"({settings.LCM_LEAF_CHUNK_TOKENS})"
            )
            return 0
        candidate = self.plan("leaf")
        if candidate is None or not self.run_pass(candidate):
            return 0
        made = len(self.summary_ids)
        if settings.LCM_INCREMENTAL_MAX_DEPTH > 0:
            made += self._passes_of("condensed", max_depth=settings.LCM_INCREMENTAL_MAX_DEPTH)
        return made

    def until_under(self, target: int) -> int:
        """Bounded rounds of full sweeps; rounds after the first condense with a fanout of 2
        so a context that one sweep cannot bring under the target keeps shrinking."""
        made = 0
        if self.context_tokens() <= target:
            self.stop_reason = f"the context is already at or under the target of {target} tokens"
            return 0
        self.stop_under = target
        for round_number in range(settings.LCM_COMPACTION_MAX_ROUNDS):
            if self.context_tokens() <= target or self._out_of_budget():
                break
            made_this_round = self.full_sweep(fanout=2 if round_number else None, stop_under=target)
            made += made_this_round
            if not made_this_round:
                break
        if self.context_tokens() > target and not self.stop_reason:
            self.stop_reason = f"target of {target} tokens not reached: nothing more was eligible"
        return made

    def run_mode(self) -> None:
        if self.mode == Mode.INCREMENTAL:
            self.incremental()
        elif self.mode == Mode.FULL:
            self.full_sweep()
        else:
            self.until_under(self.resolved_target())

    def resolved_target(self) -> int:
        if self.target_tokens is not None:
            return self.target_tokens
        return int(self.conversation.token_budget * settings.LCM_CONTEXT_THRESHOLD)


def check_mode_and_reason(*, mode: str, reason: str) -> None:
    """`InvalidInput` naming the field unless `mode` and `reason` are known choices."""
    if mode not in Mode.values:
        raise InvalidInput(f"mode must be one of {', '.join(Mode.values)}", extra={"field": "mode"})
    if reason not in Reason.values:
        raise InvalidInput(
            f"reason must be one of {', '.join(Reason.values)}", extra={"field": "reason"}
        )


def _claim_lease(conversation: Conversation, *, mode: str, reason: str, target, tokens_before):
    """Create the `running` run row; a live one already there is a retryable conflict."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.LCM_COMPACTION_MAX_SECONDS + _LEASE_GRACE_SECONDS)
    with transaction.atomic(durable=True):
        locks.try_lock(locks.LockKind.COMPACTION, conversation.pk)
        CompactionRun.objects.filter(
            Q(lease_until__lt=now) | Q(lease_until__isnull=True, started_at__lt=stale),
            conversation=conversation,
            status=RunStatus.RUNNING,
        ).update(status=RunStatus.FAILED, finished_at=now, detail="abandoned (worker stopped)")
        # The start is read just before the claiming insert (not with `now` above): a run
        # that finishes in between would otherwise seem to overlap this one.
        started = timezone.now()
        try:
            with transaction.atomic():
                return CompactionRun.objects.create(
                    conversation=conversation,
                    reason=reason,
                    mode=mode,
                    target_tokens=target,
                    tokens_before=tokens_before,
                    started_at=started,
                    lease_until=lease_deadline(started),
                )
        except IntegrityError:
            raise Conflict(
                f"conversation {conversation.pk} is being compacted; retry shortly",
                retry_after=2.0,
                extra={"conversation_id": conversation.pk},
            ) from None


def compact_conversation(
    *,
    conversation_id: int,
    mode: Literal["incremental", "full", "until_under"] = "full",
    reason: Literal["threshold", "manual", "maintenance"] = "manual",
    target_tokens: int | None = None,
    summarizer: Summarizer | None = None,
) -> CompactionResult:
    """Compact one conversation. Raises `Conflict` if another run holds it, `NotFound`,
    `InvalidInput`; a provider authentication failure is a `failed` result (nothing of the
    failing pass written) with `error_code="summarizer_auth"`."""
    conversation = _conversation_to_compact(conversation_id, mode, reason, target_tokens)
    tokens_before = _context_tokens(conversation_id)
    run = _claim_lease(
        conversation, mode=mode, reason=reason, target=target_tokens, tokens_before=tokens_before
    )
    owned = summarizer is None  # made here, so closed here (an HTTP client for the model)
    engine = CompactionEngine(
        conversation=conversation,
        mode=mode,
        reason=reason,
        target_tokens=target_tokens,
        summarizer=summarizer_from_settings() if owned else summarizer,
    )
    engine.run = run
    try:
        status, detail, error_code = _run_passes(engine, run, tokens_before)
    finally:
        if owned and hasattr(engine.summarizer, "close"):
            engine.summarizer.close()
    tokens_after = _finish(run, status, engine, tokens_before, detail)
    return CompactionResult(
        status=status.value,
        summaries_created=list(engine.summary_ids),
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        passes=engine.passes,
        run_id=run.pk,
        detail=detail,
        error_code=error_code,
        levels=dict(engine.levels),
    )


def _conversation_to_compact(
    conversation_id: int, mode: str, reason: str, target_tokens: int | None
) -> Conversation:
    check_mode_and_reason(mode=mode, reason=reason)
    if target_tokens is not None and target_tokens < 0:
        raise InvalidInput("target_tokens must be >= 0", extra={"field": "target_tokens"})
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        raise NotFound(f"conversation {conversation_id} does not exist")
    return conversation


def _run_passes(
    engine: CompactionEngine, run: CompactionRun, tokens_before: int
) -> tuple[RunStatus, str, str | None]:
    """Run the engine's mode under the run's lease: (status, detail, error code). Any error
    but a refused key records the run as failed and propagates."""
    alive = CompactionRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING)
    try:
        # renewed while this process lives (core/leases.py); the after-summary hooks
        # (memory's indexing job) fire once for the run, not once per pass
        with lease_kept(alive), after_summary_hooks_once():
            engine.run_mode()
        status = RunStatus.COMPACTED if engine.summary_ids else RunStatus.NOTHING_TO_DO
        return status, _describe(engine), None
    except SummarizerAuthError as error:  # from the pass's summarizer call
        detail = f"summarizer authentication failed, nothing written for that pass: {error}"
        if engine.summary_ids:
            detail += f" ({len(engine.summary_ids)} earlier summaries kept)"
        return RunStatus.FAILED, detail, "summarizer_auth"
    except BaseException as error:
        _finish(run, RunStatus.FAILED, engine, tokens_before, f"error: {error!r}")
        raise


def _describe(engine: CompactionEngine) -> str:
    if not engine.summary_ids:
        why = engine.stop_reason or "no range was eligible"
        return f"nothing to do: {why}"
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(engine.kinds.items()))
    text = f"{len(engine.summary_ids)} summaries ({kinds}) in {engine.passes} passes"
    if engine.stop_reason:
        text += f"; stopped: {engine.stop_reason}"
    return text


def _finish(run, status, engine: CompactionEngine, tokens_before: int, detail: str) -> int:
    tokens_after = _context_tokens(run.conversation_id)
    CompactionRun.objects.filter(pk=run.pk).update(
        status=status,
        tokens_after=tokens_after,
        passes=engine.passes,
        summary_ids=list(engine.summary_ids),
        notes={"levels": engine.levels, "notes": engine.notes[-50:]},
        detail=detail,
        finished_at=timezone.now(),
    )
    log_event(
        "compaction run finished",
        **{
            "conversation_id": run.conversation_id,
            "session_id": engine.conversation.session_id,
            "compaction_id": run.pk,
            "trigger_reason": engine.reason,
            "mode": engine.mode,
            "status": str(status),
            "token_before": tokens_before,
            "token_after": tokens_after,
            "summaries": len(engine.summary_ids),
            "passes": engine.passes,
        },
    )
    return tokens_after
