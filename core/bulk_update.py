"""Many rows of one table, each set to its own values, in few statements (retention's
restore and its memory steps write tens of thousands of rows this way).

PostgreSQL: one UPDATE from a VALUES list per batch (a round trip per row cost most of a
restore). SQLite: one parameterized UPDATE per row through executemany, which runs in
process (a bulk_update's CASE over hundreds of ids costs SQLite O(n^2)).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection


def update_rows(
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence],
    *,
    key: tuple[str, str] = ("id", "bigint"),
    where: str = "",
    batch: int = 500,
) -> int:
    """Set `columns` ((name, PostgreSQL type) pairs) of each row of `table` whose `key`
    column equals the row's last value (the others are the columns' values, in order).
    `where`: an extra condition on the row being updated, its columns qualified by the
    table's name. Runs in the caller's transaction; returns the number of rows changed."""
    if not rows:
        return 0
    quote = connection.ops.quote_name
    name = quote(table)
    condition = f" AND {where}" if where else ""
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            sets = ", ".join(f"{quote(column)} = %s" for column, _ in columns)
            cursor.executemany(
                f"UPDATE {name} SET {sets} WHERE {quote(key[0])} = %s{condition}", rows
            )
            return cursor.rowcount
        every = [*columns, key]
        one = f"({', '.join(f'%s::{kind}' for _, kind in every)})"
        names = ", ".join(quote(column) for column, _ in every)
        sets = ", ".join(f"{quote(column)} = d.{quote(column)}" for column, _ in columns)
        changed = 0
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            cursor.execute(
                f"UPDATE {name} SET {sets} FROM (VALUES {', '.join([one] * len(part))}) "
                f"AS d({names}) WHERE {name}.{quote(key[0])} = d.{quote(key[0])}{condition}",
                [value for row in part for value in row],
            )
            changed += cursor.rowcount
        return changed
