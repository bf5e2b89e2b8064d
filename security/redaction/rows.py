"""Step "rows": every other row of the scope that can hold text (conversation titles,
turns and their user messages, provider steps' request and response JSON, state
checkpoints, compaction and summarizer records, import and integrity records, ...).

Which rows: hard delete's walk (security.hard_delete.collect), which follows every
foreign key from the scope's conversations and sessions, so a table added later is
covered too. Each text or JSON column has its matches replaced; the turn rows' triggers
stand aside under the redaction permit.
"""

from __future__ import annotations

from django.db import IntegrityError, models, transaction

from archive.models import Segment
from conversations.models import (
    ContextItem,
    Message,
    MessagePart,
    Summary,
    SummaryMessage,
    SummaryParent,
)
from largefiles.models import LargeFile
from memory.models import Chunk, ChunkVector, SummaryVector
from security.hard_delete import collect
from security.redaction.context import JobContext
from security.redaction.matcher import MATCH_TIMEOUT
from security.redaction.permit import redact_permit

# The places other steps own.
OWNED = {
    Message, MessagePart, Summary, SummaryMessage, SummaryParent, ContextItem, Segment,
    LargeFile, Chunk, ChunkVector, SummaryVector,
}  # fmt: skip
_TEXT = (models.TextField, models.CharField, models.JSONField)
_BATCH = 500


def text_columns(model) -> dict[str, int | None]:
    """The columns that can hold free text, with their length limit (enumerations, keys
    and references cannot)."""
    return {
        f.attname: getattr(f, "max_length", None) if isinstance(f, models.CharField) else None
        for f in model._meta.concrete_fields
        if isinstance(f, _TEXT) and not f.primary_key and not f.is_relation and not f.choices
    }


def _fit(original, new, limit: int | None, ctx: JobContext):
    """A short column keeps its length limit: the short marker `[redacted]`, then cut."""
    if limit is None or not isinstance(new, str) or len(new) <= limit:
        return new
    return ctx.matcher.pattern.sub("[redacted]", original, timeout=MATCH_TIMEOUT)[:limit]


def scrub_model(
    model, ids: set, ctx: JobContext, *, dry: bool = False, kept: dict | None = None
) -> int:
    """Rows of `model` rewritten (or, `dry`, that would be). A rewrite that would collide
    with a unique value (two session ids differing only in the matched text) is left out
    and counted in `kept` by model: the row keeps its text, and verify reports it."""
    columns = text_columns(model)
    if not columns:
        return 0
    changed = 0
    ordered = sorted(ids, key=str)
    for start in range(0, len(ordered), _BATCH):
        batch = ordered[start : start + _BATCH]
        for row in model._base_manager.filter(pk__in=batch).values("pk", *columns):
            updates = {}
            for column, limit in columns.items():
                new, n = ctx.matcher.sub_value(row[column])
                if n:
                    updates[column] = _fit(row[column], new, limit, ctx)
            if updates and not dry:
                try:
                    with transaction.atomic():  # a savepoint: a collision undoes this row only
                        model._base_manager.filter(pk=row["pk"]).update(**updates)
                except IntegrityError:
                    if kept is not None:
                        kept[model._meta.label] = kept.get(model._meta.label, 0) + 1
                    continue
            changed += bool(updates)
    return changed


def scope_rows(ctx: JobContext) -> dict:
    """Every row of the scope, by model (hard delete's walk), the sessions included."""
    from turns.models import Session

    collected = collect(
        conversation_ids=set(ctx.row.conversation_ids), session_ids=set(ctx.row.session_ids)
    )
    if ctx.row.session_ids:
        collected.setdefault(Session, set()).update(ctx.row.session_ids)
    return collected


def run(ctx: JobContext) -> dict:
    collected = scope_rows(ctx)
    counts: dict[str, int] = {}
    kept: dict[str, int] = {}
    with transaction.atomic(), redact_permit():
        for model, ids in sorted(collected.items(), key=lambda item: item[0]._meta.label):
            if model in OWNED:
                continue
            changed = scrub_model(model, ids, ctx, kept=kept)
            if changed:
                counts[model._meta.label] = changed
    counts.update({f"{label} (kept: a unique value would collide)": n for label, n in kept.items()})
    return counts
