"""schemathesis hooks for every run against LCM (loaded by schemathesis.toml).

The one rule the schema cannot state: with `mode: regex`, grep's query must be a valid
regular expression in Python's dialect (JSON Schema's "regex" format means ECMA-262,
which refuses patterns Python accepts and the other way round). Such a query is a 400
(`invalid_regex`). Generated grep bodies whose regex does not compile are dropped, so
every check stays on for everything else grep receives."""

from __future__ import annotations

import re

import schemathesis


@schemathesis.hook
def filter_body(ctx, body):
    operation = getattr(ctx, "operation", None)
    if operation is None or operation.path != "/api/v1/grep/":
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
