"""Hard delete (SRD 14.4): the one code path that removes canonical rows.

`hard_delete_conversation` / `hard_delete_session` remove a conversation (or a turn
session with the conversations of its branches) and every row that refers to them,
directly or through other rows: messages, parts, summaries, lineage, context items,
large files, compaction runs and jobs, integrity reports, import records, memory chunks,
vectors, retrievals, branches, states, turns, steps and jobs. Search rows go with them
(SQLite FTS tables are kept in step by triggers; PostgreSQL's tsvector columns live on
the rows). After the commit, the stored file objects, stream journals and turn event
logs are removed.

Which rows: starting from the conversations (and session), every model whose foreign key
points at a collected row is collected too, until nothing new turns up. So a table added
later with a foreign key to any of these is covered without editing this module. If that
walk reaches a conversation or session outside the request (a row shared with another
conversation), nothing is deleted and the caller gets a 409 naming them.

The database refuses DELETE on canonical tables (security migration 0002, turns 0002);
`hard_delete_permit()` lifts that for this one transaction only. The audit row keeps ids and
counts, never content.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

from django.apps import apps
from django.db import connection, models, transaction

from conversations.models import Conversation
from core import locks
from core.api.errors import InvalidInput, LcmError
from largefiles.models import LargeFile
from largefiles.store import delete_objects
from security.export_store import expire_holding
from security.permits import transaction_permit
from security.services import audit_record

logger = logging.getLogger(__name__)

_BATCH = 500


class NotDeletable(LcmError):
    """The request would reach rows outside it; not retryable as it stands."""

    status = 409
    code = "not_deletable"


# Framework tables never hold conversation data (and the audit log must survive).
_SKIP_APPS = {
    "admin",
    "auth",
    "contenttypes",
    "sessions",
    "authtoken",
    "tokens",
    "django_q",
    "security",
}


@dataclass
class HardDeleteResult:
    conversation_ids: list[int]
    session_ids: list[str]
    counts: dict[str, int] = field(default_factory=dict)  # "app.Model" -> rows deleted
    files: int = 0
    journals: int = 0

    def as_dict(self) -> dict:
        return {
            "conversation_ids": self.conversation_ids,
            "session_ids": self.session_ids,
            "rows": self.counts,
            "files": self.files,
            "journals": self.journals,
        }


def _models() -> list[type[models.Model]]:
    return [m for m in apps.get_models() if m._meta.app_label not in _SKIP_APPS]


def _batches(ids: list) -> list[list]:
    return [ids[i : i + _BATCH] for i in range(0, len(ids), _BATCH)]


def collect(*, conversation_ids: set[int], session_ids: set[str]) -> dict[type, set]:
    """Every row that refers (transitively) to the given conversations and sessions."""
    from turns.models import Session

    collected: dict[type, set] = defaultdict(set)
    collected[Conversation] |= conversation_ids
    collected[Session] |= session_ids
    relations = [
        (model, f.attname, f.related_model)
        for model in _models()
        for f in model._meta.concrete_fields
        if f.is_relation and f.related_model is not None
    ]
    grew = True
    while grew:
        grew = False
        for model, column, target in relations:
            targets = collected.get(target)
            if not targets:
                continue
            found: set = set()
            for batch in _batches(sorted(targets, key=str)):
                found |= set(
                    model._base_manager.filter(**{f"{column}__in": batch}).values_list(
                        "pk", flat=True
                    )
                )
            new = found - collected[model]
            if new:
                collected[model] |= new
                grew = True
    return {model: ids for model, ids in collected.items() if ids}


def _deletion_order(collected: dict[type, set]) -> list[type]:
    """Referring tables before the tables they refer to (PostgreSQL's lineage foreign keys
    are immediate ON DELETE RESTRICT). Cycles (turn states <-> branches) are broken
    anywhere: those foreign keys are deferred to the commit."""
    order: list[type] = []
    state: dict[type, str] = {}

    def visit(model: type) -> None:
        if state.get(model) == "done":
            return
        if state.get(model) == "visiting":
            return  # a cycle of deferred keys
        state[model] = "visiting"
        for other in collected:
            if other is model:
                continue
            refers = any(
                f.is_relation and f.related_model is model for f in other._meta.concrete_fields
            )
            if refers:
                visit(other)
        state[model] = "done"
        order.append(model)

    for model in sorted(collected, key=lambda m: m._meta.label):
        visit(model)
    return order


def hard_delete_permit():
    """Lift the DELETE-refusing triggers for the current transaction only."""
    return transaction_permit(setting="lcm.hard_delete", table="turns_delete_permit")


def delete_pgvector_rows(chunk_ids: set) -> None:
    """pgvector side tables (memory/vectors/pgvector.py) are not models; clear them too."""
    if connection.vendor != "postgresql" or not chunk_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name LIKE 'memory\\_pgvec\\_%%'"
        )
        for (table,) in cursor.fetchall():
            for batch in _batches(sorted(chunk_ids)):
                cursor.execute(f'DELETE FROM "{table}" WHERE chunk_id = ANY(%s)', [batch])


def stream_paths(collected: dict[type, set]) -> list:
    from turns.events import events_path
    from turns.journal import journal_path
    from turns.models import ProviderStep, UserTurn

    paths = [journal_path(step_id) for step_id in collected.get(ProviderStep, ())]
    paths += [events_path(turn_id) for turn_id in collected.get(UserTurn, ())]
    return paths


def _journal_exists(path) -> bool:
    from turns import journal_store

    return journal_store.exists(path)


def _remove_stored(keys: list[str], paths: list) -> None:
    from turns import journal_store

    delete_objects(keys)
    for path in paths:
        journal_store.delete(path)  # the local file and the published object


def _hard_delete(
    *, conversation_ids: set[int], session_ids: set[str], actor, via: str, request, target
) -> HardDeleteResult:
    with transaction.atomic(durable=True):
        lock_conversations(conversation_ids)
        collected = collect(conversation_ids=conversation_ids, session_ids=session_ids)
        _refuse_shared_rows(collected, conversation_ids, session_ids)
        keys = list(
            LargeFile.objects.filter(pk__in=collected.get(LargeFile, ())).values_list(
                "storage_key", flat=True
            )
        )
        paths = stream_paths(collected)
        result = HardDeleteResult(
            conversation_ids=sorted(conversation_ids), session_ids=sorted(session_ids)
        )
        result.counts.update(_delete_rows(collected))
        result.files = len(keys)
        result.journals = sum(1 for path in paths if _journal_exists(path))
        audit_record(
            action="hard_delete",
            via=via,
            actor=actor,
            request=request,
            target_kind=target[0],
            target_id=target[1],
            details=result.as_dict(),
        )
        # Objects, journals and the export archives kept of them go only once the rows
        # are gone for good.
        transaction.on_commit(lambda: _remove_stored(keys, paths))
        transaction.on_commit(
            lambda: expire_holding(conversation_ids, f"deleted by hard delete of {target[1]}")
        )
    logger.info("hard delete of %s %s: %s", target[0], target[1], result.counts)
    return result


def lock_conversations(conversation_ids: set[int]) -> None:
    """Writers of these conversations wait for us (appends lock the row; compaction
    holds the advisory lock), and we wait for them."""
    list(
        Conversation.objects.select_for_update()
        .filter(pk__in=conversation_ids)
        .values_list("pk", flat=True)
    )
    for conversation_id in sorted(conversation_ids):
        locks.lock(locks.LockKind.COMPACTION, conversation_id)


def _refuse_shared_rows(collected: dict, conversation_ids: set[int], session_ids: set[str]) -> None:
    """All or nothing: rows that reach other conversations or sessions stop the delete."""
    from turns.models import Session

    outside_conversations = collected.get(Conversation, set()) - conversation_ids
    outside_sessions = collected.get(Session, set()) - session_ids
    if outside_conversations or outside_sessions:
        raise NotDeletable(
            "these rows are shared with other conversations or sessions; "
            "hard-delete those too, or nothing",
            code="shared_rows",
            extra={
                "conversation_ids": sorted(outside_conversations),
                "session_ids": sorted(outside_sessions),
            },
        )


def _delete_rows(collected: dict) -> dict[str, int]:
    """Delete every collected row, dependents first; the rows deleted per model."""
    from memory.models import Chunk

    counts = {}
    with hard_delete_permit():
        delete_pgvector_rows(collected.get(Chunk, set()))
        for model in _deletion_order(collected):
            deleted = 0
            for batch in _batches(sorted(collected[model], key=str)):
                deleted += model._base_manager.filter(pk__in=batch)._raw_delete(connection.alias)
            counts[model._meta.label] = deleted
    return counts


class ConfirmationMismatch(LcmError):
    """The confirmation names another object than the one addressed (409: the request
    does not fit the target, although it is well formed)."""

    status = 409
    code = "confirmation_mismatch"


def _check_confirmation(expected: str, confirm) -> None:
    if confirm not in (None, "") and str(confirm) != expected:
        raise ConfirmationMismatch(
            f"confirm={str(confirm)!r} does not name this object: repeat its id "
            f"(confirm={expected!r}) to hard-delete it",
            extra={"confirm": expected},
        )
    if str(confirm or "") != expected:
        raise InvalidInput(
            f"hard delete is irreversible: repeat the id to confirm (confirm={expected!r})",
            code="confirmation_required",
            extra={"confirm": expected},
        )


def hard_delete_conversation(
    *, conversation: Conversation, confirm, actor=None, via: str, request=None
) -> HardDeleteResult:
    """Delete one conversation that belongs to no turn session."""
    from turns.models import Branch

    _check_confirmation(str(conversation.pk), confirm)
    session_ids = sorted(
        set(Branch.objects.filter(conversation=conversation).values_list("session_id", flat=True))
    )
    if session_ids:
        raise NotDeletable(
            "this conversation is a branch of a turn session: hard-delete the session",
            code="belongs_to_session",
            extra={"session_ids": session_ids},
        )
    return _hard_delete(
        conversation_ids={conversation.pk},
        session_ids=set(),
        actor=actor,
        via=via,
        request=request,
        target=("conversation", conversation.pk),
    )


def hard_delete_session(
    *, session, confirm, actor=None, via: str, request=None
) -> HardDeleteResult:
    """Delete a turn session and the conversations of all its branches."""
    from turns.models import Branch

    _check_confirmation(str(session.pk), confirm)
    conversation_ids = set(
        Branch.objects.filter(session=session).values_list("conversation_id", flat=True)
    )
    return _hard_delete(
        conversation_ids=conversation_ids,
        session_ids={session.pk},
        actor=actor,
        via=via,
        request=request,
        target=("session", session.pk),
    )
