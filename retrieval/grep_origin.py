"""grep across agents: narrow the searched conversations by where they come from, and say
where each hit comes from (docs/retrieval.md, "Across agents and projects").

- `narrowed_scope`: the access scope (one conversation, the user's, or all for staff)
  cut down to the conversations an agent wrote (`agent`) in a project directory or
  below it (`project`, matched on path components: /work/api matches /work/api and
  /work/api/sub, never /work/api2). An empty result searches nothing.
- `with_origins`: every row gets `origin` (agent, project, git branch, session id, title,
  first and last times of the session; null for a conversation no coding agent wrote),
  read in one query for all rows.
- `within_time`: since/before applied to rows of the modes that rank by meaning, whose
  search does not take a time window itself.
"""

from __future__ import annotations

import datetime as dt

from conversations.models import Conversation
from conversations.origins import OriginFilter, origins_for
from conversations.search import Scope
from core.api.errors import InvalidInput

MAX_AGENT_CHARS = 32
MAX_PROJECT_CHARS = 4096


def origin_filter(*, agent: str | None, project: str | None) -> OriginFilter:
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
