"""Redaction jobs: create one from a checked request, plan it (a dry run ends there), run
its steps in order, resume one that a crash or an error left unfinished. The API queues
them for the background worker (security.redaction.queue); the command runs them here.

Steps, in order (each recorded on the job row as it finishes, in the same transaction as
its database writes, so a crash resumes at the first step not recorded; the steps that
write files are idempotent, since redacted bytes hold nothing to match):

1. canonical  messages and parts (security.redaction.canonical)
2. archive    archive segments rewritten and re-verified (archived)
3. summaries  every summary over the span, up the DAG, regenerated (summaries)
4. memory     memory units, vectors, full-text rows re-derived (memory_units)
5. files      large-file bytes and explorations (files)
6. rows       turns, steps, states and every other row of the scope (rows)
7. streams    stream journals and turn event logs (streams)
8. search_index  the search indexes' storage: deleted entries merged away on SQLite,
              old row versions vacuumed from the GIN indexes on PostgreSQL (search_storage)
9. sweep      the replaced segment and file objects deleted, and the export archives kept
              on the server that hold the scope (they hold the removed text)
10. caches    this process's caches dropped; other processes' are keyed so they miss
11. verify    every place scanned for the removed strings (verify)

A job whose verify still finds something is not done: it ends failed with the places
listed (`verification.found`), and a resume runs every step again (each acts only on
what still matches), then verifies again.

The job is audited when it ends (`redaction`): who, when, why, the scope, the kind of
selector, counts per place and the verification; never the text nor a hash of it.
"""

from __future__ import annotations

import os
import signal
import uuid

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.utils import timezone

from core.api.errors import InvalidInput, LcmError
from security.export_store import expire_holding
from security.hard_delete import lock_conversations
from security.models import Redaction, RedactionState
from security.redaction import (
    archived,
    canonical,
    files,
    memory_units,
    rows,
    search_storage,
    streams,
    summaries,
)
from security.redaction.context import JobContext
from security.redaction.matcher import MATCH_TIMEOUT, MIN_NEEDLE, seal, unseal
from security.redaction.plan import TEXT_COLUMNS, form_strings, message_forms, plan
from security.redaction.request import RedactionRequest
from security.redaction.verify import verify
from security.services import audit_record


class NotResumable(LcmError):
    status = 409
    code = "not_resumable"


def _caches(ctx: JobContext) -> dict:
    from archive.selectors import forget
    from compaction.assembly import clear_summary_cache
    from memory.embeddings import clear_query_cache

    forget()
    clear_summary_cache()
    clear_query_cache()
    return {"process": os.getpid()}


def _sweep(ctx: JobContext) -> dict:
    """Delete the objects the archive and files steps replaced (their switches are
    committed by now; deleting a missing object again is a no-op, so a resume is safe)."""
    from archive import segments
    from largefiles.store import delete_objects

    old_segments = ctx.row.steps.get("archive", {}).get("superseded", [])
    old_files = ctx.row.steps.get("files", {}).get("superseded", [])
    for key in old_segments:
        if segments.exists(key):
            segments.delete(key)
    delete_objects(old_files)
    archives = expire_holding(ctx.row.conversation_ids, f"deleted by redaction {ctx.row.pk}")
    return {"segments": len(old_segments), "files": len(old_files), "export_archives": archives}


def _checked_strings(ctx: JobContext) -> list[str]:
    """What verify looks for: the literal asked for, whatever its length; of the texts of
    whole messages, spans and regex matches, those long enough not to match everywhere."""
    needles = [n for n in ctx.sealed.get("needles", []) if len(n) >= MIN_NEEDLE]
    if ctx.sealed.get("literal"):
        needles = [ctx.sealed["literal"], *needles]
    return list(dict.fromkeys(needles))


# The content table behind each search index, and the step count that says it changed.
_REWRITTEN = {
    "conversations_message": ("canonical", "messages"),
    "conversations_summary": ("summaries", "summaries"),
    "memory_chunk": ("memory", "chunks_rederived"),
}


def _search_index(ctx: JobContext) -> dict:
    """Clear the removed text out of the search indexes' storage: every index over a table
    the job rewrote, and any other whose pages still hold a needle's token (left there by
    an earlier delete: an archived message, a memory unit derived again)."""
    store = search_storage.storage()
    indexes = store.indexes()
    steps = ctx.row.steps
    rewritten = {table for table, (step, key) in _REWRITTEN.items() if steps.get(step, {}).get(key)}
    holding = {remnant.index for remnant in store.remnants(_checked_strings(ctx))}
    chosen = {index for index, table in indexes.items() if table in rewritten} | holding
    if store.vendor == "postgresql":  # VACUUM works per table
        return store.merge(sorted({indexes[index] for index in chosen}))
    return store.merge(sorted(chosen))


def _verify(ctx: JobContext) -> dict:
    result = verify(_checked_strings(ctx))
    ctx.row.verification = result.as_dict()
    return {"occurrences": result.count}


STEPS = (
    ("canonical", canonical.run),
    ("archive", archived.run),
    ("summaries", summaries.run),
    ("memory", memory_units.run),
    ("files", files.run),
    ("rows", rows.run),
    ("streams", streams.run),
    ("search_index", _search_index),
    ("sweep", _sweep),
    ("caches", _caches),
    ("verify", _verify),
)
STEP_NAMES = tuple(name for name, _ in STEPS)


def crash_point(step: str) -> None:
    """Fault injection for the crash tests: LCM_REDACT_CRASH_AT=<step> kills the process
    right after that step is recorded (an environment variable, so no setting turns it on)."""
    if os.environ.get("LCM_REDACT_CRASH_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


def _needles(request: RedactionRequest, found: list[str]) -> dict:
    if request.selector_kind == "literal":
        return {"literal": request.literal, "needles": [request.literal]}
    if request.selector_kind == "regex":
        return {"regex": request.regex, "needles": found}
    if request.selector_kind == "span":
        ((form, _),) = message_forms(request.scope.conversation_ids, request.message_ids)
        span = request.span
        return {"needles": [form["content"][span["start"] : span["end"]]]}
    texts: list[str] = []
    for form, _ in message_forms(request.scope.conversation_ids, request.message_ids):
        texts += form_strings(form, columns=TEXT_COLUMNS)
    return {"needles": texts}


def create(
    request: RedactionRequest,
    *,
    actor,
    via: str,
    state: str = RedactionState.RUNNING,
    request_key: str = "",
) -> Redaction:
    """The job row: what it addresses and the sealed strings; planned when it runs."""
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    row = Redaction(
        id=f"red_{uuid.uuid4().hex[:16]}",
        actor_id=actor.pk if authenticated else None,
        actor_name=actor.get_username() if authenticated else "",
        via=via,
        reason=request.reason,
        scope_kind=request.scope.kind,
        scope_id=request.scope.id,
        selector_kind=request.selector_kind,
        selector=request.selector(),
        conversation_ids=request.scope.conversation_ids,
        session_ids=request.scope.session_ids,
        message_ids=list(request.message_ids),
        sealed=seal(_needles(request, [])),
        dry_run=request.dry_run,
        request_key=request_key,
        state=state,
    )
    row.save()
    return row


def _plan(row: Redaction) -> tuple[dict, list[str]]:
    try:
        return plan(JobContext.of(row))
    except TimeoutError:
        raise InvalidInput(
            f"the regex took over {MATCH_TIMEOUT:g} s on one text: simplify it",
            code="regex_too_slow",
        ) from None


def _planned(row: Redaction) -> None:
    """Every place the job touches, with counts, on its row (a regex's matches sealed: verify
    looks for exactly those); the selected message ids are kept, the plan's guesses not."""
    selected = list(row.message_ids)
    try:
        places, found = _plan(row)
    except LcmError as error:
        row.state, row.error = RedactionState.FAILED, error.message
        Redaction.objects.filter(pk=row.pk).update(state=row.state, error=row.error)
        raise
    if row.selector_kind == "regex":
        row.sealed = seal({**unseal(row.sealed), "needles": found})
        places["distinct_matches"] = len(found)
    row.plan, row.exports, row.message_ids = places, places["exports_on_record"], selected
    row.save(update_fields=["plan", "exports", "message_ids", "sealed"])


def execute(row: Redaction, *, http_request=None) -> Redaction:
    """Plan the job, then run its steps to the end; a dry run ends with its plan (every
    place it would touch, with counts) and writes nothing else."""
    if not row.plan:
        _planned(row)
    if not row.dry_run:
        return run(row, http_request=http_request)
    row.state, row.sealed, row.finished_at = RedactionState.DONE, "", timezone.now()
    row.save(update_fields=["state", "sealed", "finished_at"])
    return row


def start(request: RedactionRequest, *, actor=None, via: str, http_request=None) -> Redaction:
    """Create the job and run it here to the end (the command's default; the API queues)."""
    return execute(create(request, actor=actor, via=via), http_request=http_request)


# Run before their record's transaction: verify folds SQLite's WAL into the database file
# first (a checkpoint cannot run inside a transaction) and only reads;
# search_index runs its own short transactions (a merge piece each; VACUUM in none).
_OUTSIDE_TRANSACTION = {"verify", "search_index"}


def _run_step(ctx: JobContext, name: str, step) -> None:
    counts = step(ctx) if name in _OUTSIDE_TRANSACTION else None
    with transaction.atomic():
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:  # overwritten text is zeroed on disk
                cursor.execute("PRAGMA secure_delete = ON")
        if counts is None:
            # Appends and compaction of these conversations wait for the step, and it for
            # them, so no summary is written from content read before the redaction.
            lock_conversations(set(ctx.row.conversation_ids))
            counts = step(ctx)
        ctx.row.steps = {**ctx.row.steps, name: {**counts, "at": timezone.now().isoformat()}}
        ctx.row.save(update_fields=["steps", "message_ids", "verification"])
    crash_point(name)


def run(row: Redaction, *, http_request=None) -> Redaction:
    """Run the steps not yet recorded, then finish: the job row done, the needles
    cleared, the audit row written."""
    ctx = JobContext.of(row)
    for name, step in STEPS:
        if name in row.steps:
            continue
        try:
            _run_step(ctx, name, step)
        except Exception as error:
            Redaction.objects.filter(pk=row.pk).update(
                state=RedactionState.FAILED, error=f"step {name}: {type(error).__name__}"
            )
            raise
    if row.verification.get("occurrences"):
        _fail_verification(row)
    else:
        _finish(row, http_request)
    return row


def _fail_verification(row: Redaction) -> None:
    """Not done while verify finds anything: failed, with the places (by name, never by
    text) in the error and in `verification.found`; the needles stay sealed for a resume."""
    places: dict[str, int] = {}
    for where in row.verification.get("found", []):
        name = where.get("table") or where.get("path") or where.get("place")
        places[name] = places.get(name, 0) + 1
    listed = ", ".join(f"{name} ({n})" for name, n in sorted(places.items()))
    row.state = RedactionState.FAILED
    row.error = f"verify found {row.verification['occurrences']} occurrences: {listed}"[:2000]
    Redaction.objects.filter(pk=row.pk).update(state=row.state, error=row.error)


def _finish(row: Redaction, http_request) -> None:
    counts = {
        name: {k: v for k, v in row.steps[name].items() if k not in ("at", "ids", "superseded")}
        for name in STEP_NAMES
    }
    with transaction.atomic():
        row.state = RedactionState.DONE
        row.sealed = ""
        row.error = ""
        row.finished_at = timezone.now()
        row.save(update_fields=["state", "sealed", "error", "finished_at"])
        audit_record(
            action="redaction",
            via=row.via,
            actor=get_user_model().objects.filter(pk=row.actor_id).first(),
            request=http_request,
            target_kind=row.scope_kind,
            target_id=row.scope_id,
            details={
                "redaction": row.pk,
                "reason": row.reason,
                "actor_id": row.actor_id,
                "selector": row.selector_kind,
                "conversations": len(row.conversation_ids),
                "messages": len(row.message_ids),
                "steps": counts,
                "verification": {
                    "occurrences": row.verification.get("occurrences"),
                    "places_scanned": row.verification.get("places_scanned"),
                },
                "exports_on_record": len(row.exports),
            },
        )


def resume(redaction_id: str) -> Redaction:
    row = Redaction.objects.filter(pk=redaction_id).first()
    if row is None:
        raise NotResumable(f"no redaction {redaction_id}", code="not_found")
    if row.state == RedactionState.DONE:
        raise NotResumable(f"redaction {redaction_id} is done")
    reopen(row, state=RedactionState.RUNNING)
    return execute(row)


def reopen(row: Redaction, *, state: str) -> None:
    """Back to `state` (running here, or pending for a worker) to go on from the first
    step not recorded; a job whose verify still found something runs every step again."""
    if "verify" in row.steps:
        row.steps = {}
    row.state, row.error = state, ""
    Redaction.objects.filter(pk=row.pk).update(state=state, error="", steps=row.steps)


def resume_unfinished() -> list[str]:
    """Run every job a crash or an error left unfinished (oldest first)."""
    done = []
    for row in Redaction.objects.exclude(state=RedactionState.DONE).order_by("created_at"):
        resume(row.pk)
        done.append(row.pk)
    return done


def report(row: Redaction) -> dict:
    done = sum(name in row.steps for name in STEP_NAMES)
    return {
        "id": row.pk,
        "url": f"/api/v1/redactions/{row.pk}/",
        "state": row.state,
        "dry_run": row.dry_run,
        "progress": {
            "steps_done": len(STEP_NAMES) if row.state == RedactionState.DONE else done,
            "steps_total": 0 if row.dry_run else len(STEP_NAMES),
            "step": next((n for n in STEP_NAMES if n not in row.steps), None)
            if row.state == RedactionState.RUNNING and row.plan
            else None,
        },
        "reason": row.reason,
        "marker": f"[redacted: {row.reason} {row.pk}]",
        "scope": {"kind": row.scope_kind, "id": row.scope_id},
        "selector": row.selector_kind,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
        "by": row.actor_name,
        "plan": row.plan,
        "steps": row.steps,
        "verification": row.verification,
        "exports_on_record": row.exports,
        "error": row.error,
    }
