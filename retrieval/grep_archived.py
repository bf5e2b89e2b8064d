"""Grep over archived ranges (docs/retention.md): with `include_archived`, message hits
also come from the archive segments in scope, scanned in Python (regex, or every query word
for full text), since the database no longer holds (nor indexes) their content.

The scan is bounded: at most LCM_GREP_ARCHIVE_SEGMENTS segments, newest first, each read
through the archive's short cache. Its hits carry `from_archive: true`; `score` is null
(the search backend's ranking does not reach them), so under sort=relevance they come
after the ranked database hits.
"""

from __future__ import annotations

import datetime as dt

import regex
from django.conf import settings

from archive.models import Segment, SegmentState
from archive.selectors import segment_forms
from conversations.search.query import Scope, as_datetime
from conversations.search.text import snippet_at, snippet_for_words
from core.api.errors import InvalidInput

_WORD = regex.compile(r"\w+")


def _matcher(mode: str, query: str, ignore_case: bool):
    if mode == "regex":
        try:
            pattern = regex.compile(query, regex.IGNORECASE if ignore_case else 0)
        except regex.error as error:
            raise InvalidInput(f"invalid regex: {error}", extra={"field": "query"}) from None

        def match(text: str) -> str | None:
            found = pattern.search(text, timeout=1.0)
            return snippet_at(text, found.start(), found.end()) if found else None

        return match
    words = [w.casefold() for w in _WORD.findall(query)]

    def match_words(text: str) -> str | None:
        present = {w.casefold() for w in _WORD.findall(text)}
        return snippet_for_words(text, words) if words and set(words) <= present else None

    return match_words


def _segments(scope: Scope):
    queryset = Segment.objects.filter(state=SegmentState.ACTIVE)
    if scope.conversation_ids is not None:
        queryset = queryset.filter(conversation_id__in=scope.conversation_ids)
    elif scope.owner_id is not None:
        queryset = queryset.filter(conversation__owner_id=scope.owner_id)
    return queryset.order_by("-created_at", "-pk")[: settings.LCM_GREP_ARCHIVE_SEGMENTS]


def grep_archived(
    *,
    scope: Scope,
    query: str,
    mode: str,
    ignore_case: bool,
    since: dt.datetime | None,
    before: dt.datetime | None,
    limit: int,
) -> list[dict]:
    match = _matcher(mode, query, ignore_case)
    hits: list[dict] = []
    for segment in _segments(scope):
        for form in segment_forms(segment).values():
            created = as_datetime(form["created_at"])
            if (since and created < since) or (before and created >= before):
                continue
            texts = [form["content"]] + [
                p[c] for p in form["parts"] for c in ("text_content", "tool_output") if p[c]
            ]
            snippet = next((s for s in map(match, texts) if s is not None), None)
            if snippet is None:
                continue
            hits.append(
                {
                    "type": "message",
                    "id": form["id"],
                    "conversation_id": form["conversation_id"],
                    "created_at": created,
                    "snippet": snippet,
                    "score": None,
                    "seq": form["seq"],
                    "from_archive": True,
                }
            )
    hits.sort(key=lambda h: (h["created_at"], h["id"]), reverse=True)
    return hits[:limit]
