"""Fast multi-row inserts for ingest: COPY on PostgreSQL, executemany on SQLite.

Django's bulk_create prepares every field of every object in Python, which for a batch
of 1,000 messages with 2 parts of 30 columns each costs more than the database work.
These writers send plain tuples. Values must already be what the column stores: this
module is only for append-only canonical rows built by `conversations.services`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from functools import lru_cache

from django.db import connection, models

# Rows per multi-row INSERT ... RETURNING (SQLite allows 32,766 parameters).
_RETURNING_CHUNK = 500


@lru_cache(maxsize=256)
def _json_columns(model: type[models.Model]) -> frozenset[str]:
    return frozenset(
        f.column for f in model._meta.concrete_fields if isinstance(f, models.JSONField)
    )


@lru_cache(maxsize=256)
def _typed_columns(
    model: type[models.Model], columns: tuple[str, ...]
) -> tuple[tuple[int, models.Field], ...]:
    """(index, field) of the datetime and decimal columns (cached: one-message appends
    call this per statement)."""
    fields = {f.column: f for f in model._meta.concrete_fields}
    return tuple(
        (i, fields[c])
        for i, c in enumerate(columns)
        if isinstance(fields[c], models.DateTimeField | models.DecimalField)
    )


def _sqlite_adapters(model: type[models.Model], columns: Sequence[str]) -> list[tuple[int, object]]:
    """SQLite stores datetimes as naive UTC text and decimals as text: adapt those columns
    exactly as Django would, so rows written here compare and sort like ORM-written ones."""
    ops = connection.ops
    adapters = []
    for i, field in _typed_columns(model, tuple(columns)):
        if isinstance(field, models.DateTimeField):
            adapters.append((i, ops.adapt_datetimefield_value))
        else:
            adapters.append(
                (
                    i,
                    lambda v, f=field: ops.adapt_decimalfield_value(
                        v, f.max_digits, f.decimal_places
                    ),
                )
            )
    return adapters


def _sqlite_row(row: Sequence, json_at: Sequence[int], adapters) -> Sequence:
    if not (json_at or adapters):
        return row
    row = list(row)
    for i in json_at:
        if row[i] is not None:
            row[i] = json.dumps(row[i], ensure_ascii=False)
    for i, adapt in adapters:
        if row[i] is not None:
            row[i] = adapt(row[i])
    return row


def insert_returning(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Sequence[Sequence],
    *,
    key: str,
) -> dict:
    """Insert rows with multi-row `INSERT ... RETURNING` and return {row[key]: id}: the
    keys come back with the write (RETURNING's row order is unspecified, hence `key`, a
    column unique among the rows). One statement per chunk of rows."""
    table = model._meta.db_table
    json_cols = _json_columns(model)
    json_at = [i for i, c in enumerate(columns) if c in json_cols]
    at = list(columns).index(key)
    one = "(" + ", ".join(["%s"] * len(columns)) + ")"
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    tail = f" RETURNING {key}, id"
    if connection.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        def adapt(row):
            row = list(row)
            for i in json_at:
                if row[i] is not None:
                    row[i] = Jsonb(row[i])
            return row
    else:
        adapters = _sqlite_adapters(model, columns)

        def adapt(row):
            return _sqlite_row(row, json_at, adapters)

    ids: dict = {}
    with connection.cursor() as cursor:
        for start in range(0, len(rows), _RETURNING_CHUNK):
            chunk = rows[start : start + _RETURNING_CHUNK]
            params = [value for row in chunk for value in adapt(row)]
            cursor.execute(head + ", ".join([one] * len(chunk)) + tail, params)
            ids.update(cursor.fetchall())
    if len(ids) != len(rows) or any(row[at] not in ids for row in rows):
        raise ValueError(f"insert_returning: {key} must be unique among the rows")
    return ids


def allocate_ids(model: type[models.Model], count: int) -> list[int] | None:
    """Reserve `count` primary keys on PostgreSQL (None elsewhere: the database assigns them)."""
    if connection.vendor != "postgresql" or count == 0:
        return None
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            [table, count],
        )
        return [row[0] for row in cursor.fetchall()]


def insert_rows(
    model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence]
) -> None:
    table = model._meta.db_table
    json_cols = _json_columns(model)
    json_at = [i for i, c in enumerate(columns) if c in json_cols]
    if connection.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        column_list = ", ".join(columns)
        with (
            connection.cursor() as cursor,
            # The raw psycopg cursor bypasses Django's error translation: wrap it, so a
            # refused row raises django.db.IntegrityError like any ORM write.
            connection.wrap_database_errors,
            cursor.cursor.copy(f"COPY {table} ({column_list}) FROM STDIN") as copy,
        ):
            for row in rows:
                if json_at:
                    row = list(row)
                    for i in json_at:
                        if row[i] is not None:
                            row[i] = Jsonb(row[i])
                copy.write_row(row)
        return
    placeholders = ", ".join(["%s"] * len(columns))
    adapters = _sqlite_adapters(model, columns)
    prepared = [_sqlite_row(row, json_at, adapters) for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})", prepared
        )
