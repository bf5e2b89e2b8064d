"""Fast multi-row inserts for ingest: COPY on PostgreSQL, executemany on SQLite.

Django's bulk_create prepares every field of every object in Python, which for a batch
of 1,000 messages with 2 parts of 30 columns each costs more than the database work.
These writers send plain tuples. Values must already be what the column stores: this
module is only for append-only canonical rows built by `conversations.services`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from django.db import connection, models


def _json_columns(model: type[models.Model]) -> set[str]:
    return {f.column for f in model._meta.concrete_fields if isinstance(f, models.JSONField)}


def _sqlite_adapters(model: type[models.Model], columns: Sequence[str]) -> list[tuple[int, object]]:
    """SQLite stores datetimes as naive UTC text and decimals as text: adapt those columns
    exactly as Django would, so rows written here compare and sort like ORM-written ones."""
    fields = {f.column: f for f in model._meta.concrete_fields}
    adapters = []
    for i, column in enumerate(columns):
        field = fields[column]
        if isinstance(field, models.DateTimeField):
            adapters.append((i, connection.ops.adapt_datetimefield_value))
        elif isinstance(field, models.DecimalField):
            adapters.append(
                (
                    i,
                    lambda v, f=field: connection.ops.adapt_decimalfield_value(
                        v, f.max_digits, f.decimal_places
                    ),
                )
            )
    return adapters


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
    json_at = [i for i, c in enumerate(columns) if c in _json_columns(model)]
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
    prepared = []
    for row in rows:
        if json_at or adapters:
            row = list(row)
            for i in json_at:
                if row[i] is not None:
                    row[i] = json.dumps(row[i], ensure_ascii=False)
            for i, adapt in adapters:
                if row[i] is not None:
                    row[i] = adapt(row[i])
        prepared.append(row)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})", prepared
        )
