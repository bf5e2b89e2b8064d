"""schemathesis hooks for every run against LCM (loaded by schemathesis.toml).

The rules the schema cannot state: with `mode: regex`, grep's query must be a valid
regular expression in Python's dialect (JSON Schema's "regex" format means ECMA-262,
which refuses patterns Python accepts and the other way round); a redaction's regex must
also match neither the empty string nor its own marker (security/redaction/pattern.py).
Either is a 400 (`invalid_regex`). Generated bodies that break them are dropped, so every
check stays on for everything else those operations receive."""

from __future__ import annotations

import re

import schemathesis

from security.redaction.pattern import regex_problem


@schemathesis.hook
def filter_body(ctx, body):
    operation = getattr(ctx, "operation", None)
    if operation is None:
        return True
    if operation.path != "/api/v1/grep/":
        return True
    if not isinstance(body, dict) or body.get("mode") != "regex":
        return True
    query = body.get("query")
    if not isinstance(query, str):
        return True  # a schema-violating body: the negative checks want it sent
    try:
        re.compile(query)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


@schemathesis.hook
def filter_case(ctx, case):
    # A case hook: unlike filter_body, it also applies in the coverage phase.
    if not case.operation.path.endswith("/redactions/") or not isinstance(case.body, dict):
        return True
    pattern = case.body.get("regex")
    return not isinstance(pattern, str) or regex_problem(pattern) is None
