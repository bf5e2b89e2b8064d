"""Writes to the canonical store. Every service owns its transaction.

Appends serialize per conversation on the conversation row (its row lock on PostgreSQL,
taken by SELECT ... FOR UPDATE or by the UPDATE that advances the counters; the
IMMEDIATE write lock on SQLite), which is what makes `seq` and the context ordinal
gap-free under concurrent writers. Nothing here updates or deletes a
message, part, summary or lineage edge.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations import bulk, one_statement_append, secret_guard
from conversations.inputs import MessageInput, PartInput, render_parts_text
from conversations.interception import Intercepted, NothingStaged, intercept
from conversations.models import ContextItem, Conversation, ItemType, Message, MessagePart
from core.api.errors import InvalidInput, NotFound
from core.token_estimate import estimate

logger = logging.getLogger("lcm.ingest")

# Called (on commit) with the conversation id after messages were appended; the
# compaction app registers its scheduler here, so ingest does not import it.
_after_append_hooks: list[Callable[[int], None]] = []


def register_after_append(hook: Callable[[int], None]) -> None:
    if hook not in _after_append_hooks:
        _after_append_hooks.append(hook)


@dataclass(frozen=True)
class AppendedMessage:
    message: Message
    created: bool


def conversation_create(
    *, owner, session_id: str, title: str = "", token_budget: int | None = None
) -> tuple[Conversation, bool]:
    """Create a conversation, or return the owner's existing one with this session id."""
    if not session_id or len(session_id) > 255:
        raise InvalidInput("session_id must be 1 to 255 characters", extra={"field": "session_id"})
    budget = token_budget if token_budget is not None else settings.LCM_DEFAULT_TOKEN_BUDGET
    if budget <= 0:
        raise InvalidInput(
            "token_budget must be a positive integer", extra={"field": "token_budget"}
        )
    existing = Conversation.objects.filter(owner=owner, session_id=session_id).first()
    if existing:
        return existing, False
    try:
        with transaction.atomic():
            return Conversation.objects.create(
                owner=owner, session_id=session_id, title=title, token_budget=budget
            ), True
    except IntegrityError:  # a concurrent create of the same session won the race
        return Conversation.objects.get(owner=owner, session_id=session_id), False


def _message_row(
    conversation_id: int,
    seq: int,
    item: MessageInput,
    content: str,
    tokens: int,
    now,
    *,
    file_ids: list[str],
) -> Message:
    """The stored message as the caller gets it back (its key is set once written)."""
    return Message(
        conversation_id=conversation_id,
        seq=seq,
        role=item.role,
        content=content,
        token_count=tokens,
        created_at=item.created_at or now,
        external_id=item.external_id,
        file_ids=file_ids,
    )


def message_text_and_tokens(*, content: str, parts: Sequence[PartInput]) -> tuple[str, int]:
    """The stored text and token count of a message: its content, or, when that is blank,
    the text of its parts; counted as the larger of the two, since parts may carry more
    than the text (tool inputs and outputs). Ingest and the lossless-claw importer both
    prepare canonical rows through this one rule."""
    if not parts:
        return content, estimate(content)
    rendered = render_parts_text(tuple(parts))
    text = content if content.strip() else rendered
    return text, max(estimate(text), estimate(rendered))


def messages_append(
    *, conversation_id: int, messages: Sequence[MessageInput]
) -> list[AppendedMessage]:
    """Append messages in order; re-sent external ids return the stored original.

    All or nothing: either every new message, its parts and its context item are
    written, or nothing is.

    Secrets are masked (or flagged) first, by the conversation's policy (`secret_guard`).
    Then large file blocks and tool outputs (at or above LCM_LARGE_FILE_TOKEN_THRESHOLD tokens)
    are intercepted, before the transaction (exploring a text may call the model):
    the stored message carries the compact reference and `file_ids`. Their bytes are
    written before the transaction too, their `large_files` rows inside it, under the
    conversation lock.
    """
    if not messages:
        return []
    # Secrets first (masked before anything, large-file bytes included, is stored).
    guarded = secret_guard.guard_messages(conversation_id=conversation_id, messages=messages)
    messages = guarded.messages
    batch = intercept(conversation_id=conversation_id, messages=messages)
    file_ids: Sequence[list[str]] = ()
    if batch is not None:
        messages, file_ids = batch.messages, batch.file_ids
    prepared = [message_text_and_tokens(content=m.content, parts=m.parts) for m in messages]
    if not guarded.found and one_statement_append.applies(
        messages=messages, has_large_files=batch is not None
    ):
        return _append_in_one_statement(conversation_id, messages, prepared)
    external_ids = [m.external_id for m in messages if m.external_id is not None]
    # With no external ids every message is new: the lock statement advances the counters
    # too (UPDATE ... RETURNING), one statement fewer than lock, then advance.
    reserve = len(messages) if not external_ids else 0
    with _staging(batch, conversation_id) as files, transaction.atomic(durable=True):
        session_id, last_seq, last_ordinal = _lock_conversation(conversation_id, reserve)
        # Read under the lock: writers take it in turn, so server-assigned times rise with
        # `seq` (a time read before the lock could be older than the previous writer's).
        now = timezone.now()
        existing = _stored_by_external_id(conversation_id, external_ids)
        results, new_rows = _number_new_messages(
            conversation_id, messages, prepared, file_ids, existing, last_seq, now
        )
        if not new_rows:
            return results
        files.record(used={f for m, _ in new_rows for f in m.file_ids})
        if batch is not None and batch.remapped:
            new_rows = [_swap_ids(m, item, batch) for m, item in new_rows]
        _insert_new_messages(conversation_id, session_id, new_rows, last_ordinal, now)
        created = [r.message.pk if r.created else None for r in results]
        secret_guard.record_findings(
            conversation_id=conversation_id, guarded=guarded, message_ids=created, now=now
        )
        if not reserve:
            _advance_counters(
                conversation_id, new_rows[-1][0].seq, last_ordinal + len(new_rows), now
            )
        if _after_append_hooks:
            transaction.on_commit(lambda: _run_after_append_hooks(conversation_id))
    logger.debug("appended %d message(s) to conversation %s", len(new_rows), conversation_id)
    return results


def _staging(batch: Intercepted | None, conversation_id: int):
    """The large files set aside (written now, their rows recorded under the lock)."""
    if batch is None:
        return nullcontext(NothingStaged())
    return batch.staged(conversation_id=conversation_id)


def _lock_conversation(conversation_id: int, reserve: int) -> tuple[str, int, int]:
    """Take the append lock; (session id, last seq, last ordinal) before this append. With
    `reserve`, the same statement advances both counters by that many."""
    with connection.cursor() as cursor:
        if reserve:
            cursor.execute(
                _RESERVE_SQL, [reserve, reserve, _db_datetime(timezone.now()), conversation_id]
            )
        else:
            cursor.execute(_LOCK_SQL[connection.vendor == "postgresql"], [conversation_id])
        locked = cursor.fetchone()
    if locked is None:
        raise NotFound(f"conversation {conversation_id} does not exist")
    session_id, last_seq, last_ordinal = locked
    return session_id, last_seq - reserve, last_ordinal - reserve


def _stored_by_external_id(conversation_id: int, external_ids: list[str]) -> dict:
    if not external_ids:
        return {}
    return {
        m.external_id: m
        for m in Message.objects.filter(
            conversation_id=conversation_id, external_id__in=external_ids
        )
    }


def _number_new_messages(
    conversation_id: int,
    messages: Sequence[MessageInput],
    prepared: list[tuple[str, int]],
    file_ids: Sequence[list[str]],
    existing: dict,
    last_seq: int,
    now,
) -> tuple[list[AppendedMessage], list[tuple[Message, MessageInput]]]:
    """What the caller gets back (stored originals for re-sent external ids) and the new
    rows, numbered from `last_seq` on. A repeat later in the batch is a re-send too."""
    seq = last_seq
    results: list[AppendedMessage] = []
    new_rows: list[tuple[Message, MessageInput]] = []
    for index, (item, (content, tokens)) in enumerate(zip(messages, prepared, strict=True)):
        if item.external_id is not None and item.external_id in existing:
            results.append(AppendedMessage(existing[item.external_id], created=False))
            continue
        seq += 1
        message = _message_row(
            conversation_id, seq, item, content, tokens, now,
            file_ids=list(file_ids[index]) if file_ids else [],
        )  # fmt: skip
        new_rows.append((message, item))
        results.append(AppendedMessage(message, created=True))
        if item.external_id is not None:
            existing[item.external_id] = message
    return results, new_rows


def _advance_counters(conversation_id: int, seq: int, ordinal: int, now) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_ADVANCE_SQL, [seq, ordinal, _db_datetime(now), conversation_id])


_CONVERSATION = Conversation._meta.db_table
# The append lock: the conversation row, FOR UPDATE on PostgreSQL (SQLite's IMMEDIATE
# transaction already holds the database's write lock). Raw SQL: the ORM spent more
# time building these two statements than the database spent running them.
_LOCK_SQL = {
    False: f"SELECT session_id, last_seq, last_context_ordinal FROM {_CONVERSATION} WHERE id = %s",
    True: f"SELECT session_id, last_seq, last_context_ordinal FROM {_CONVERSATION} WHERE id = %s"
    " FOR UPDATE",
}
_ADVANCE_SQL = (
    f"UPDATE {_CONVERSATION} SET last_seq = %s, last_context_ordinal = %s, updated_at = %s"
    " WHERE id = %s"
)
# Lock and advance at once, when the number of new messages is known up front.
_RESERVE_SQL = (
    f"UPDATE {_CONVERSATION} SET last_seq = last_seq + %s,"
    " last_context_ordinal = last_context_ordinal + %s, updated_at = %s WHERE id = %s"
    " RETURNING session_id, last_seq, last_context_ordinal"
)


def _append_in_one_statement(
    conversation_id: int, messages: Sequence[MessageInput], prepared
) -> list[AppendedMessage]:
    """PostgreSQL, a few messages without external ids or large files: one statement
    (`one_statement_append`). Durable like the general path: refused inside a caller's
    transaction (Django's test cases excepted, as `atomic(durable=True)` does)."""
    if connection.atomic_blocks and not connection.atomic_blocks[-1]._from_testcase:
        raise RuntimeError("messages_append commits its own writes: call it outside a transaction")
    # Inside a test case's transaction, a savepoint, so a refused statement rolls back
    # alone (as the general path's atomic block does there); otherwise autocommit.
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        written = one_statement_append.append(
            conversation_id=conversation_id,
            messages=messages,
            prepared=prepared,
            part_ordinals=[_part_ordinals(item) for item in messages],
            now=timezone.now(),
        )
    if written is None:
        raise NotFound(f"conversation {conversation_id} does not exist")
    results = []
    for item, (content, tokens), (pk, seq, created_at) in zip(
        messages, prepared, written, strict=True
    ):
        message = _message_row(conversation_id, seq, item, content, tokens, created_at, file_ids=[])
        message.pk = pk
        results.append(AppendedMessage(message, created=True))
    if _after_append_hooks:  # at once in autocommit; after the caller's commit in a test case
        transaction.on_commit(lambda: _run_after_append_hooks(conversation_id))
    logger.debug("appended %d message(s) to conversation %s", len(results), conversation_id)
    return results


def _db_datetime(value):
    return (
        connection.ops.adapt_datetimefield_value(value) if connection.vendor == "sqlite" else value
    )


def _run_after_append_hooks(conversation_id: int) -> None:
    """Run the hooks once the append committed, in autocommit mode, with no transaction
    around them: each hook statement commits on its own (a read commits nothing), so a
    hook that hits a database error spoils neither another hook nor the append, and the
    hooks cost no BEGIN and COMMIT (two round trips on PostgreSQL, a write lock and a
    WAL commit on SQLite). Hooks swallow their errors; this guards against one that
    does not. (django-q's ORM broker reconnects before an enqueue made outside a
    transaction: hooks enqueue rarely, once per job, since jobs coalesce.)"""
    for hook in _after_append_hooks:
        try:
            hook(conversation_id)
        except Exception:
            logger.exception("after-append hook %s failed", getattr(hook, "__name__", hook))


def _swap_ids(
    message: Message, item: MessageInput, batch: Intercepted
) -> tuple[Message, MessageInput]:
    """Use the file ids a concurrent writer stored first (same length: same tokens)."""
    mapping = batch.remapped
    for old, new in mapping.items():
        message.content = message.content.replace(old, new)
    message.file_ids = list(dict.fromkeys(mapping.get(f, f) for f in message.file_ids))
    return message, batch.swap_ids(item, mapping)


# The columns a message row is written with (ingest, and importers that write rows in bulk).
MESSAGE_COLUMNS = (
    "conversation_id",
    "seq",
    "role",
    "content",
    "token_count",
    "created_at",
    "external_id",
    "file_ids",
)
_PART_KEY_COLUMNS = ("message_id", "session_id", "part_type", "ordinal")
_CONTEXT_COLUMNS = (
    "conversation_id",
    "ordinal",
    "item_type",
    "message_id",
    "token_count",
    "created_at",
)


def _part_ordinals(item: MessageInput) -> list[int]:
    """An omitted ordinal follows the previous part's (0 for the first), skipping ordinals
    that other parts of the message state explicitly, so list order is kept."""
    taken = {p.ordinal for p in item.parts if p.ordinal is not None}
    ordinals, previous = [], -1
    for part in item.parts:
        if part.ordinal is None:
            candidate = previous + 1
            while candidate in taken:
                candidate += 1
            taken.add(candidate)
            previous = candidate
        else:
            previous = part.ordinal
        ordinals.append(previous)
    return ordinals


# In the general path (external ids or large files), up to this many messages PostgreSQL
# gets one INSERT ... RETURNING (COPY is faster for more, but takes an extra statement to
# reserve the keys and two round trips).
_FEW = one_statement_append.MAX_MESSAGES


def _insert_many_messages(messages: list[Message], values: list) -> None:
    """A PostgreSQL batch: keys reserved from the sequence in one statement, then COPY."""
    ids = bulk.allocate_ids(Message, len(messages))
    for message, pk in zip(messages, ids, strict=True):
        message.pk = pk
    bulk.insert_rows(
        Message,
        ("id", *MESSAGE_COLUMNS),
        [(pk, *row) for pk, row in zip(ids, values, strict=True)],
    )


def _insert_new_messages(
    conversation_id: int,
    session_id: str,
    new_rows: list[tuple[Message, MessageInput]],
    last_ordinal: int,
    now,
) -> None:
    """Insert messages, their parts and their context items; sets each message's pk."""
    messages = [m for m, _ in new_rows]
    values = [
        (
            conversation_id,
            m.seq,
            m.role,
            m.content,
            m.token_count,
            m.created_at,
            m.external_id,
            m.file_ids,
        )
        for m in messages
    ]
    if connection.vendor == "postgresql" and len(messages) > _FEW:
        _insert_many_messages(messages, values)  # keys reserved, then COPY
    else:  # INSERT ... RETURNING: no separate statement to learn the keys
        ids = bulk.insert_returning(Message, MESSAGE_COLUMNS, values, key="seq")
        for message in messages:
            message.pk = ids[message.seq]

    # Only the part columns this batch uses: the rest default to NULL.
    used = sorted({name for _, item in new_rows for part in item.parts for name in part.columns})
    part_rows = []
    for message, item in new_rows:
        for part, part_ordinal in zip(item.parts, _part_ordinals(item), strict=True):
            part_rows.append(
                (message.pk, session_id, part.part_type, part_ordinal, *map(part.columns.get, used))
            )
    if part_rows:
        bulk.insert_rows(MessagePart, (*_PART_KEY_COLUMNS, *used), part_rows)
    bulk.insert_rows(
        ContextItem,
        _CONTEXT_COLUMNS,
        [
            (conversation_id, last_ordinal + i, ItemType.MESSAGE.value, m.pk, m.token_count, now)
            for i, m in enumerate(messages, start=1)
        ],
    )
