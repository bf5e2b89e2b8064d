"""grep as the caller sees it: validated input, the access scope, hits with `covered_by`."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from django.conf import settings

from conversations.search import GrepQuery, Scope, grep
from conversations.selectors import conversation_get_for_user
from core.api.errors import InvalidInput, Unavailable
from core.metrics import observe_ms
from retrieval import dag
from retrieval.grep_origin import (
    narrowed_scope,
    origin_filter,
    search_within,
    with_origins,
    within_time,
)

MODES = ("regex", "full_text", "semantic", "hybrid")  # the last two: registered, see below
SCOPES = {
    "messages": ("message",),
    "summaries": ("summary",),
    "both": ("message", "summary"),
    "files": (),  # stored large-file content, see retrieval.grep_files
}
SORTS = ("recency", "relevance")
DEFAULT_LIMIT, MAX_LIMIT = 50, 200
MAX_QUERY_CHARS = 1000


@dataclass(frozen=True)
class GrepRequest:
    query: str
    mode: str = "full_text"
    scope: str = "both"
    conversation_id: int | None = None
    since: dt.datetime | None = None
    before: dt.datetime | None = None
    limit: int = DEFAULT_LIMIT
    sort: str = "recency"
    ignore_case: bool = False
    include_archived: bool = False  # also scan archive segments (docs/retention.md)
    # Where the conversations come from (retrieval.grep_origin): an agent, a project dir.
    agent: str | None = None
    project: str | None = None

    def validate(self) -> None:
        if not isinstance(self.query, str) or not self.query.strip():
            raise InvalidInput("query must be a non-empty string", extra={"field": "query"})
        if len(self.query) > MAX_QUERY_CHARS:
            raise InvalidInput(
                f"query is longer than {MAX_QUERY_CHARS} characters", extra={"field": "query"}
            )
        if self.mode not in MODES:
            raise InvalidInput(
                "mode must be regex, full_text, semantic or hybrid", extra={"field": "mode"}
            )
        if self.mode in ("semantic", "hybrid") and self.scope == "files":
            raise InvalidInput(
                "semantic and hybrid modes search messages, summaries and chunks, not files",
                extra={"field": "scope"},
            )
        if self.scope not in SCOPES:
            raise InvalidInput(
                "scope must be messages, summaries, both or files", extra={"field": "scope"}
            )
        if self.sort not in SORTS:
            raise InvalidInput("sort must be recency or relevance", extra={"field": "sort"})
        if not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be from 1 to {MAX_LIMIT}", extra={"field": "limit"})
        # since >= before is an empty window: it matches nothing (no error, as the schema
        # cannot state an order between two fields).


def scope_for_user(*, user, conversation_id: int | None) -> Scope:
    """One conversation through the checkpoint, else every conversation the user may see."""
    if conversation_id is not None:
        conversation = conversation_get_for_user(user=user, conversation_id=conversation_id)
        return Scope(conversation_ids=(conversation.pk,))
    if user.is_staff:
        return Scope()
    return Scope(owner_id=user.pk)


def grep_for_user(*, user, request: GrepRequest, scope: Scope | None = None) -> list[dict]:
    request.validate()
    if scope is None:
        scope = scope_for_user(user=user, conversation_id=request.conversation_id)
    wide, scope = scope, narrowed_scope(scope, origin_filter(request.agent, request.project))
    started = time.perf_counter()
    if request.scope == "files":
        from retrieval.grep_files import grep_files

        results = grep_files(scope=scope, request=request)
        mode = f"{request.mode}_files"
    elif request.mode in ("semantic", "hybrid"):
        results = search_within(_grep_by_meaning, scope, wide, request, by_meaning=True)
        results = within_time(results, since=request.since, before=request.before)
        mode = request.mode
    else:
        results = search_within(_grep_rows, scope, wide, request)
        mode = request.mode
        if request.include_archived and request.scope in ("messages", "both"):
            results = _with_archived(results, scope=scope, request=request)
        if not results and request.mode == "full_text" and _is_sentence(request.query):
            results = search_within(_any_word_rows, scope, wide, request, by_meaning=True)
            mode = "full_text_any_word"
    observe_ms(
        "lcm_search_latency_ms",
        (time.perf_counter() - started) * 1000,
        help="Latency of grep (describe/expand excluded), by mode.",
        mode=mode,
    )
    return with_origins(results)


# Search by meaning (modes semantic and hybrid) is the memory app's: it registers its
# search here in its ready() (memory/apps.py), as it sits above this app.
MeaningSearch = Callable[..., list[dict]]
_meaning_search: MeaningSearch | None = None


def register_meaning_search(search: MeaningSearch) -> None:
    """`search(scope=, query=, limit=, mode=, scope_name=, full_text_rows=)` -> hits."""
    global _meaning_search
    _meaning_search = search


def _grep_by_meaning(*, scope: Scope, request: GrepRequest) -> list[dict]:
    """Chunks and summaries by meaning (semantic), fused with full-text hits (hybrid)."""
    if _meaning_search is None:
        raise Unavailable(f"grep mode {request.mode} needs the memory app, which is not installed")
    return _meaning_search(
        scope=scope,
        query=request.query,
        limit=request.limit,
        mode=request.mode,
        scope_name=request.scope,
        full_text_rows=lambda: _grep_rows(
            scope=scope, request=replace(request, mode="full_text", sort="relevance")
        ),
    )


def _with_archived(results: list[dict], *, scope: Scope, request: GrepRequest) -> list[dict]:
    """Database hits, then (recency: merged by time) hits scanned from archive segments."""
    from retrieval.grep_archived import grep_archived

    archived = grep_archived(
        scope=scope,
        query=request.query,
        mode=request.mode,
        ignore_case=request.ignore_case,
        since=request.since,
        before=request.before,
        limit=request.limit,
    )
    if archived:
        ids = [hit["id"] for hit in archived]
        covering = dag.covering_summary_rows(ids)
        for hit in archived:
            hit["covered_by"] = covering.get(hit["id"])
    merged = results + archived
    if request.sort == "recency":
        merged.sort(key=lambda h: h["created_at"], reverse=True)
    return merged[: request.limit]


# Full text on a sentence: a question's words are rarely all in one message, so when the
# all-words query finds nothing, grep answers with the messages that hold any of them,
# ranked by BM25 over the memory's search units (stems, stop words out; memory.recall),
# each row marked `matched: "any_word"` (docs/memory.md, "Full text on a question").
ANY_WORD = "any_word"


def _is_sentence(query: str) -> bool:
    return len(query.split()) > 1


def _any_word_rows(*, scope: Scope, request: GrepRequest) -> list[dict]:
    """Message rows for the units BM25 ranks first (one per message, best first)."""
    if _meaning_search is None or request.scope == "summaries":
        return []
    units = _meaning_search(
        scope=scope,
        query=request.query,
        limit=request.limit,
        mode="full_text",
        scope_name="messages",
        full_text_rows=None,
    )
    from conversations.models import Message

    wanted = {(row["conversation_id"], row["seq"]) for row in units}
    messages = {
        (m.conversation_id, m.seq): m
        for m in Message.objects.filter(
            conversation_id__in={c for c, _ in wanted}, seq__in={s for _, s in wanted}
        ).only("id", "conversation_id", "seq", "created_at")
        if (m.conversation_id, m.seq) in wanted
    }
    rows, seen = [], set()
    for unit in units:
        message = messages.get((unit["conversation_id"], unit["seq"]))
        if message is None or message.pk in seen:
            continue
        if (request.since and message.created_at < request.since) or (
            request.before and message.created_at >= request.before
        ):
            continue
        seen.add(message.pk)
        rows.append(
            {
                "type": "message",
                "id": message.pk,
                "conversation_id": message.conversation_id,
                "created_at": message.created_at,
                "snippet": unit["snippet"].replace("«", "‹").replace("»", "›"),
                "score": unit["score"],
                "seq": message.seq,
                "matched": ANY_WORD,
            }
        )
    covering = dag.covering_summary_rows([row["id"] for row in rows]) if rows else {}
    for row in rows:
        row["covered_by"] = covering.get(row["id"])
    return rows


def _grep_rows(*, scope: Scope, request: GrepRequest) -> list[dict]:
    """Messages and/or summaries through the search backend; message hits name the
    active-context summary covering them (one query for all)."""
    q = GrepQuery(
        query=request.query,
        mode=request.mode,  # type: ignore[arg-type]
        scope=scope,
        since=request.since,
        before=request.before,
        limit=request.limit,
        sort=request.sort,  # type: ignore[arg-type]
        ignore_case=request.ignore_case,
        timeout_ms=settings.LCM_GREP_TIMEOUT_MS,
    )
    hits = grep(q, SCOPES[request.scope])
    message_ids = [hit.id for hit in hits if hit.table == "message"]
    covering = dag.covering_summary_rows(message_ids) if message_ids else {}
    results = []
    for hit in hits:
        row = {
            "type": hit.table,
            "id": hit.id,
            "conversation_id": hit.conversation_id,
            "created_at": hit.created_at,
            "snippet": hit.snippet,
            "score": hit.score,
        }
        if hit.table == "message":
            row["seq"] = hit.seq
            row["covered_by"] = covering.get(hit.id)
        else:
            row["depth"] = hit.depth
            row["kind"] = hit.kind
        results.append(row)
    return results
