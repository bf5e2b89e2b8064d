"""Stored token counts against the content they count.

A message without parts stores exactly `estimate(content)`; one with parts stores the larger
of its text's and its parts' estimates, so at least `estimate(content)`. A summary stores
`estimate(content)`. A context item copies its message's or summary's count. An archived
message (docs/retention.md) keeps its count while its content is in a segment: the archive
checks hash that content instead.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection

from core.token_estimate import estimate
from integrity.checks.lineage import CONTEXT, MESSAGE, SUMMARY
from integrity.checks.scope import Scope, fetch

PART = "conversations_messagepart"
_CHUNK = 2000


def _stream(sql: str, params: list):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(_CHUNK):
            yield from rows


# ASCII text under the default estimator is ceil(characters / 4) tokens: the database
# can check those rows itself, and only the rest travel to Python.
_DEFAULT_ESTIMATOR = "core.token_estimate.estimate_tokens"
_LENGTHS = {
    "postgresql": ("octet_length(m.content)", "char_length(m.content)"),
    "sqlite": ("length(CAST(m.content AS BLOB))", "length(m.content)"),
}


def _message_rows(scope: Scope):
    """(conversation_id, id, seq, content, stored, has_parts) of the messages to check
    in Python; with the default estimator, ASCII rows that are right are left out."""
    where, params = scope.where("m.conversation_id")
    has_parts = f"EXISTS (SELECT 1 FROM {PART} p WHERE p.message_id = m.id)"
    if settings.LCM_TOKEN_ESTIMATOR != _DEFAULT_ESTIMATOR:
        return _stream(
            f"""SELECT m.conversation_id, m.id, m.seq, m.content, m.token_count, {has_parts}
                FROM {MESSAGE} m WHERE m.archived_in IS NULL{where}
                ORDER BY m.conversation_id, m.seq""",
            params,
        )
    octets, chars = _LENGTHS[connection.vendor]
    ascii_tokens = f"(({chars} + 3) / 4)"
    return _stream(
        f"""SELECT m.conversation_id, m.id, m.seq, m.content, m.token_count, {has_parts}
            FROM {MESSAGE} m
            WHERE m.archived_in IS NULL AND ({octets} <> {chars}
                   OR m.token_count < {ascii_tokens}
                   OR (m.token_count <> {ascii_tokens} AND NOT {has_parts})){where}
            ORDER BY m.conversation_id, m.seq""",
        params,
    )


def token_count_mismatches(scope: Scope) -> list[dict]:
    problems: list[dict] = []
    for conversation_id, message_id, seq, content, stored, has_parts in _message_rows(scope):
        expected = estimate(content)
        if stored < expected or (stored != expected and not has_parts):
            problems.append(
                {
                    "conversation_id": conversation_id,
                    "kind": "message",
                    "id": str(message_id),
                    "seq": seq,
                    "stored": stored,
                    "expected": expected,
                }
            )
    where, params = scope.where("s.conversation_id")
    for conversation_id, summary_id, content, stored in _stream(
        f"""SELECT s.conversation_id, s.id, s.content, s.token_count FROM {SUMMARY} s
            WHERE 1 = 1{where} ORDER BY s.conversation_id, s.id""",
        params,
    ):
        expected = estimate(content)
        if stored != expected:
            problems.append(
                {
                    "conversation_id": conversation_id,
                    "kind": "summary",
                    "id": summary_id,
                    "stored": stored,
                    "expected": expected,
                }
            )
    where, params = scope.where("ci.conversation_id")
    for row in fetch(
        f"""SELECT ci.conversation_id, 'context_item' AS kind, CAST(ci.id AS TEXT) AS id,
                   ci.ordinal, ci.token_count AS stored,
                   COALESCE(m.token_count, s.token_count) AS expected
            FROM {CONTEXT} ci
            LEFT JOIN {MESSAGE} m ON m.id = ci.message_id
            LEFT JOIN {SUMMARY} s ON s.id = ci.summary_id
            WHERE COALESCE(m.token_count, s.token_count) IS NOT NULL
              AND ci.token_count <> COALESCE(m.token_count, s.token_count){where}
            ORDER BY ci.conversation_id, ci.ordinal""",
        params,
    ):
        problems.append(row)
    return problems
