"""The search indexes below their query surface: what a redaction leaves in their storage,
and the step that clears it (docs/security.md, "Search indexes").

A query reads an index through its live entries only, so a phrase query after a
redaction finds nothing, yet the storage may still hold the removed text:

- SQLite FTS5 records a delete as a tombstone appended in a new segment; the old segment
  keeps the term, its rowid and its positions (which spell the text out again on a
  trigram index) until a merge folds the segments into one. `remnants` decodes the leaf
  pages of every FTS5 table (`<table>_data`, and the separator terms of `<table>_idx`)
  and reports a needle's token that the pages hold and no live row does; `merge` runs an
  incremental full merge (`'merge', -N` then `'merge', N` until no work is left), each
  piece its own short transaction with `secure_delete` on, so the pages it frees are
  zeroed and appends wait for one piece at a time, never for the whole index.
- PostgreSQL keeps a rewritten row's old version (and its GIN entries, the lexemes of its
  tsvector) until VACUUM removes it. `remnants` counts, per GIN index over a tsvector,
  the index entries a needle's lexemes reach beyond the live rows (EXPLAIN ANALYZE of a
  bitmap index scan: the index's own count, before the heap's visibility check); `merge`
  runs `VACUUM (INDEX_CLEANUP ON)` on the tables, which needs no lock that blocks writers
  and cannot run inside a transaction. Plain VACUUM frees the space but does not zero it:
  the old bytes stay in the table's pages until `VACUUM FULL` (docs/security.md).

One interface chosen by `connection.vendor` (`storage()`), used by the job's
"search_index" step and by verify.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from django.db import connection, transaction

_MAIN_INDEX = b"0"  # FTS5 prefixes every term of its main index with this byte
_FIRST_SEGMENT_ROWID = 1 << 37  # rowids of leaf and doclist-index pages start here
_MERGE_PAGES = 200  # leaf pages per merge piece (one short write transaction each)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's big-endian varint at `at`: (value, offset after it)."""
    value = 0
    for index in range(9):
        byte = data[at]
        at += 1
        if index == 8:
            return (value << 8) | byte, at
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at
    return value, at


def leaf_terms(page: bytes) -> list[bytes]:
    """The terms stored on one FTS5 leaf page, whole (the page footer lists each term's
    offset; the first is stored in full, each next one after the bytes it shares with the
    one before)."""
    footer = int.from_bytes(page[2:4], "big")
    offsets, at, position = [], footer, 0
    while at < len(page):
        delta, at = _varint(page, at)
        position += delta
        offsets.append(position)
    terms: list[bytes] = []
    for index, offset in enumerate(offsets):
        if index == 0:
            size, start = _varint(page, offset)
            term = page[start : start + size]
        else:
            shared, start = _varint(page, offset)
            size, start = _varint(page, start)
            term = terms[-1][:shared] + page[start : start + size]
        terms.append(term)
    return terms


@dataclass
class Remnant:
    table: str  # the storage table holding it (`<fts>_data`, `<fts>_idx`, an index name)
    index: str  # the search index (FTS5 table, or GIN index)
    row: str  # page id, or the number of entries
    needle: int  # which needle (its position), never its text

    def as_dict(self) -> dict:
        return {
            "place": "search_index_storage",
            "table": self.table,
            "index": self.index,
            "row": self.row,
            "string": self.needle,
        }


class SqliteSearchStorage:
    vendor = "sqlite"

    def indexes(self) -> dict[str, str]:
        """FTS5 table -> the table its content comes from."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE '%%fts5%%'"
            )
            rows = cursor.fetchall()
        found = {}
        for name, sql in rows:
            content = re.search(r"content\s*=\s*'([^']+)'", sql)
            found[name] = content.group(1) if content else name
        return found

    def _tokenizer(self, table: str) -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [table])
            (sql,) = cursor.fetchone()
        option = re.search(r"tokenize\s*=\s*'([^']+)'", sql)
        return option.group(1) if option else "unicode61"

    def tokens(self, table: str, needles: list[str]) -> list[set[bytes]]:
        """Each needle's tokens as `table`'s tokenizer makes them (a temporary FTS5 table
        with the same tokenizer indexes the needles; fts5vocab lists its terms)."""
        tokenizer = self._tokenizer(table).replace("'", "''")
        out: list[set[bytes]] = [set() for _ in needles]
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS temp.lcm_tokens_vocab")
            cursor.execute("DROP TABLE IF EXISTS temp.lcm_tokens")
            cursor.execute(
                f"CREATE VIRTUAL TABLE temp.lcm_tokens USING fts5(t, tokenize='{tokenizer}')"
            )
            cursor.execute(
                "CREATE VIRTUAL TABLE temp.lcm_tokens_vocab "
                "USING fts5vocab(temp, lcm_tokens, 'instance')"
            )
            for index, needle in enumerate(needles):
                cursor.execute(
                    "INSERT INTO temp.lcm_tokens(rowid, t) VALUES (%s, %s)", [index + 1, needle]
                )
            cursor.execute("SELECT doc, term FROM temp.lcm_tokens_vocab")
            for doc, term in cursor.fetchall():
                out[doc - 1].add(term.encode())
            cursor.execute("DROP TABLE temp.lcm_tokens_vocab")
            cursor.execute("DROP TABLE temp.lcm_tokens")
        return out

    def _live(self, table: str, terms: set[bytes]) -> set[bytes]:
        if not terms:
            return set()
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS temp.lcm_live_vocab")
            cursor.execute(
                f"CREATE VIRTUAL TABLE temp.lcm_live_vocab USING fts5vocab(main, '{table}', 'row')"
            )
            marks = ", ".join(["%s"] * len(terms))
            cursor.execute(
                f"SELECT term FROM temp.lcm_live_vocab WHERE term IN ({marks})",
                [t.decode() for t in terms],
            )
            live = {term.encode() for (term,) in cursor.fetchall()}
            cursor.execute("DROP TABLE temp.lcm_live_vocab")
        return live

    def _stored(self, table: str, terms: set[bytes]) -> list[tuple[str, str, bytes]]:
        """(storage table, page, term) for each of `terms` the pages hold."""
        wanted = {_MAIN_INDEX + t for t in terms}
        found = []
        with connection.cursor() as cursor:
            cursor.execute(
                f'SELECT id, block FROM "{table}_data" WHERE id >= %s', [_FIRST_SEGMENT_ROWID]
            )
            for rowid, block in cursor.fetchall():
                if (rowid >> 31) & 0x3F:  # a doclist-index page: rowids, no terms
                    continue
                for term in leaf_terms(bytes(block)):
                    if term in wanted:
                        found.append((f"{table}_data", str(rowid), term[1:]))
            cursor.execute(f'SELECT segid, term, pgno FROM "{table}_idx"')
            for segid, term, page in cursor.fetchall():
                if bytes(term) in wanted:
                    found.append((f"{table}_idx", f"{segid}:{page}", bytes(term)[1:]))
        return found

    def remnants(self, needles: list[str]) -> list[Remnant]:
        """Tokens of the needles that an index's pages hold and no live row does."""
        found = []
        for table in self.indexes():
            tokens = self.tokens(table, needles)
            every = set().union(*tokens) if tokens else set()
            stored = self._stored(table, every)
            if not stored:
                continue
            dead = {term for _, _, term in stored} - self._live(table, every)
            for storage, page, term in stored:
                if term in dead:
                    index = next(i for i, t in enumerate(tokens) if term in t)
                    found.append(Remnant(storage, table, page, index))
        return found

    def merge(self, tables: list[str]) -> dict:
        """Fold each index into one segment without its deleted entries, in short
        transactions (zeroing the pages freed)."""
        pieces = 0
        for table in tables:
            command = f'INSERT INTO "{table}"("{table}", rank) VALUES (\'merge\', %s)'
            pages = -_MERGE_PAGES  # negative: start a merge of every segment
            while True:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("PRAGMA secure_delete = ON")
                    before = connection.connection.total_changes
                    cursor.execute(command, [pages])
                    changed = connection.connection.total_changes - before
                pieces += 1
                pages = _MERGE_PAGES
                if changed < 2:  # FTS5: less than two changed rows means no work left
                    break
        return {"merged": sorted(tables), "merge_pieces": pieces}


class PostgresSearchStorage:
    vendor = "postgresql"

    def indexes(self) -> dict[str, str]:
        """GIN index over a tsvector column -> its table."""
        with connection.cursor() as cursor:
            cursor.execute(
                """SELECT i.relname, t.relname, a.attname
                   FROM pg_index x
                   JOIN pg_class i ON i.oid = x.indexrelid
                   JOIN pg_class t ON t.oid = x.indrelid
                   JOIN pg_am am ON am.oid = i.relam AND am.amname = 'gin'
                   JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
                   WHERE t.relnamespace = current_schema()::regnamespace
                     AND a.atttypid = 'tsvector'::regtype"""
            )
            self._columns = {index: (table, column) for index, table, column in cursor.fetchall()}
        return {index: table for index, (table, _) in self._columns.items()}

    def _counts(self, cursor, table: str, column: str, needle: str) -> tuple[int, int]:
        """(entries the GIN index returns, live rows) for the needle's lexemes."""
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        cursor.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF, SUMMARY OFF) "
            f'SELECT 1 FROM "{table}" WHERE "{column}" @@ plainto_tsquery(\'english\', %s)',
            [needle],
        )
        (plan,) = cursor.fetchone()
        top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
        scans = [top]
        index_rows = 0
        while scans:
            node = scans.pop()
            if node["Node Type"] == "Bitmap Index Scan":
                index_rows += node["Actual Rows"]
            scans += node.get("Plans", [])
        return index_rows, top["Actual Rows"]

    def remnants(self, needles: list[str]) -> list[Remnant]:
        """GIN entries of old row versions (dead, not yet vacuumed) holding a needle's
        lexemes. Inside a transaction its own rewrites are such versions: not checked."""
        if connection.in_atomic_block:
            return []
        found = []
        for index in self.indexes():
            table, column = self._columns[index]
            for position, needle in enumerate(needles):
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute("SELECT numnode(plainto_tsquery('english', %s)) > 0", [needle])
                    if not cursor.fetchone()[0]:
                        continue  # only stop words: nothing to index
                    entries, live = self._counts(cursor, table, column, needle)
                if entries > live:
                    found.append(Remnant(index, index, str(entries - live), position))
        return found

    def merge(self, tables: list[str]) -> dict:
        if connection.in_atomic_block:  # VACUUM cannot run in a transaction
            return {"vacuumed": [], "vacuum_skipped": "inside a transaction"}
        with connection.cursor() as cursor:
            for table in tables:
                cursor.execute(f'VACUUM (INDEX_CLEANUP ON) "{table}"')
        return {"vacuumed": sorted(tables)}


def storage() -> SqliteSearchStorage | PostgresSearchStorage:
    if connection.vendor == "postgresql":
        return PostgresSearchStorage()
    return SqliteSearchStorage()
