"""Redaction jobs asked for through the API: queued for the background worker, answered
at once (202 with the job's URL, where its progress and result are read), the same job
for the same request, and a dry run first for a selector that may match everywhere.

- Same request, same job: a request is keyed by an HMAC (a key derived from SECRET_KEY) of
  who asks, the scope, the selector and the reason; a job of the same key that is queued,
  running, or done within the last ten minutes is answered again; a failed one is queued
  again to resume from its first step not done.
- Dry run first: a literal shorter than DRY_RUN_FIRST_BELOW characters, or a regex, could
  rewrite a great part of the scope. Such a request is refused (409 `dry_run_required`)
  unless it names, in `confirm_dry_run`, a finished dry run of the same selector and
  scope by the same user; the dry run's `plan` says what it would touch, as counts.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.api.errors import LcmError
from core.leases import lease_deadline, lease_kept
from security import background
from security.models import Redaction, RedactionState
from security.redaction import jobs
from security.redaction.request import RedactionRequest

logger = logging.getLogger("lcm.security")
TASK = "security.tasks.run_redaction"
DRY_RUN_FIRST_BELOW = 8  # characters: a shorter literal may match everywhere
# A finished job answers the same request this long (a client retrying after a lost
# answer); later, the request is a new job: content may have come in since.
SAME_JOB_FOR = timedelta(minutes=10)


class DryRunRequired(LcmError):
    status = 409
    code = "dry_run_required"


def request_key(request: RedactionRequest, actor_id: int | None, *, dry_run: bool) -> str:
    asked = {
        "actor": actor_id,
        "scope": [request.scope.kind, request.scope.id],
        "selector": request.selector_kind,
        "message_ids": request.message_ids,
        "span": request.span,
        "literal": request.literal,
        "regex": request.regex,
        "reason": request.reason,
        "dry_run": dry_run,
    }
    payload = json.dumps(asked, sort_keys=True, ensure_ascii=False)
    return salted_hmac("lcm.redaction.request", payload, algorithm="sha256").hexdigest()


def needs_dry_run(request: RedactionRequest) -> bool:
    if request.selector_kind == "regex":
        return True
    return request.selector_kind == "literal" and len(request.literal) < DRY_RUN_FIRST_BELOW


def _check_dry_run(request: RedactionRequest, actor_id: int | None) -> None:
    dry = request_key(request, actor_id, dry_run=True)
    confirmed = request.confirm_dry_run and Redaction.objects.filter(
        pk=request.confirm_dry_run, request_key=dry, state=RedactionState.DONE, dry_run=True
    )
    if confirmed and confirmed.exists():
        return
    what = "a regex" if request.selector_kind == "regex" else (
        f"a literal of fewer than {DRY_RUN_FIRST_BELOW} characters"
    )  # fmt: skip
    raise DryRunRequired(
        f"{what} may match everywhere: send the same request with `dry_run: true`, read "
        "its `plan` (what it would touch, as counts) at the job's URL, then send it again "
        "with `confirm_dry_run` set to the dry run's id",
        extra={"selector": request.selector_kind},
    )


def _same(key: str) -> Redaction | None:
    recent = timezone.now() - SAME_JOB_FOR
    return (
        Redaction.objects.filter(request_key=key)
        .exclude(state=RedactionState.DONE, finished_at__lt=recent)
        .order_by("-created_at")
        .first()
    )


def submit(
    request: RedactionRequest, *, actor, via: str, queued: bool = True
) -> tuple[Redaction, bool]:
    """The job for this request, queued for a worker after the commit (or, `queued=False`,
    left pending for the caller's `run_queued`): (job, created)."""
    actor_id = actor.pk if getattr(actor, "is_authenticated", False) else None
    key = request_key(request, actor_id, dry_run=request.dry_run)
    with transaction.atomic():
        existing = _same(key)
        if existing is not None:
            if existing.state == RedactionState.FAILED:  # a retry resumes it
                jobs.reopen(existing, state=RedactionState.PENDING)
                if queued:
                    transaction.on_commit(lambda: enqueue(existing.pk))
            return existing, False
        if not request.dry_run and needs_dry_run(request):
            _check_dry_run(request, actor_id)
        row = jobs.create(
            request, actor=actor, via=via, state=RedactionState.PENDING, request_key=key
        )
        if queued:
            transaction.on_commit(lambda: enqueue(row.pk))
    return row, True


def enqueue(redaction_id: str) -> None:
    background.enqueue(TASK, redaction_id)


def run_queued(redaction_id: str) -> Redaction | None:
    """The worker's side: claim the queued job (compare-and-set), run it under a lease that
    a reconciler takes over when this worker dies. None if another worker has it."""
    claimed = Redaction.objects.filter(pk=redaction_id, state=RedactionState.PENDING).update(
        state=RedactionState.RUNNING, lease_until=lease_deadline()
    )
    if not claimed:
        return None
    row = Redaction.objects.get(pk=redaction_id)
    with lease_kept(Redaction.objects.filter(pk=row.pk, state=RedactionState.RUNNING)):
        try:
            jobs.execute(row)
        except Exception:  # recorded on the row (failed, with the step); the client polls
            logger.exception("redaction %s failed", redaction_id)
    row.refresh_from_db()
    return row
