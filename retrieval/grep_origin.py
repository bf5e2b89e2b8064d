"""grep across agents: narrow the searched conversations by where they come from, and say
where each hit comes from (docs/retrieval.md, "Across agents and projects").

- `narrowed_scope`: the access scope (one conversation, the user's, or all for staff)
  cut down to the conversations an agent wrote (`agent`) in a project directory or
  below it (`project`, matched on path components: /work/api matches /work/api and
  /work/api/sub, never /work/api2). An empty result searches nothing; a very long one is
  searched wide and filtered (`search_within`).
- `with_origins`: every row gets `origin` (agent, project, git branch, session id, title,
  first and last times of the session; null for a conversation no coding agent wrote),
  read in one query for all rows.
- `within_time`: since/before applied to rows of the modes that rank by meaning, whose
  search does not take a time window itself.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from conversations.models import Conversation
from conversations.origins import OriginFilter, origins_for
from conversations.search import Scope
from core.api.errors import InvalidInput

MAX_AGENT_CHARS = 32
MAX_PROJECT_CHARS = 4096
# A narrowed scope is a list of conversation ids. The search by meaning turns it into one
# OR term per conversation (memory.vectors.scope_sql), and SQLite refuses an expression
# deeper than 1,000; an IN list stops at 32,766 parameters. Past these, the search runs
# over the unnarrowed scope with the most rows grep returns, and the rows are filtered.
MAX_LISTED_FOR_MEANING = 500
MAX_LISTED = 20_000
OVERFETCH = 200  # retrieval.grep.MAX_LIMIT


def origin_filter(agent: str | None, project: str | None) -> OriginFilter:
    """The filter grep's `agent` and `project` name, checked."""
    if agent is not None and (not isinstance(agent, str) or len(agent) > MAX_AGENT_CHARS):
        raise InvalidInput(
            f"agent must be a string of at most {MAX_AGENT_CHARS} characters",
            extra={"field": "agent"},
        )
    if project is not None and (not isinstance(project, str) or len(project) > MAX_PROJECT_CHARS):
        raise InvalidInput(
            f"project must be a path of at most {MAX_PROJECT_CHARS} characters",
            extra={"field": "project"},
        )
    return OriginFilter(agents=(agent,) if agent else (), project=project or "")


def narrowed_scope(scope: Scope, origin: OriginFilter) -> Scope:
    if not origin:
        return scope
    if scope.conversation_ids is not None:
        conversations = Conversation.objects.filter(pk__in=scope.conversation_ids)
    elif scope.owner_id is not None:
        conversations = Conversation.objects.filter(owner_id=scope.owner_id)
    else:
        conversations = Conversation.objects.all()
    return Scope(conversation_ids=tuple(origin.conversation_ids(conversations)))


def search_within(search, scope: Scope, wide: Scope, request, *, by_meaning=False) -> list[dict]:
    """`search(scope=, request=)` over the narrowed `scope`, or (a very long list of ids)
    over `wide` with its rows filtered to the narrowed conversations."""
    listed = scope.conversation_ids
    cap = MAX_LISTED_FOR_MEANING if by_meaning else MAX_LISTED
    if listed is None or len(listed) <= cap or wide == scope:
        return search(scope=scope, request=request)
    allowed = frozenset(listed)
    rows = search(scope=wide, request=replace(request, limit=max(request.limit, OVERFETCH)))
    return [row for row in rows if row["conversation_id"] in allowed][: request.limit]


def with_origins(rows: list[dict]) -> list[dict]:
    """The rows, each with `origin` (a new key; nothing else of a row changes)."""
    origins = origins_for(row["conversation_id"] for row in rows)
    for row in rows:
        row["origin"] = origins.get(row["conversation_id"])
    return rows


def within_time(
    rows: list[dict], *, since: dt.datetime | None, before: dt.datetime | None
) -> list[dict]:
    if since is None and before is None:
        return rows
    return [
        row
        for row in rows
        if row.get("created_at") is not None
        and (since is None or row["created_at"] >= since)
        and (before is None or row["created_at"] < before)
    ]
