"""Grep over archived ranges (docs/retention.md): with `include_archived`, message hits
also come from the archive segments in scope, scanned in Python (regex, or every query word
for full text), since the database no longer holds (nor indexes) their content.

The scan is bounded: at most LCM_GREP_ARCHIVE_SEGMENTS segments, newest first, each read
once through the archive's verified reader and then kept as searchable text
(archive.search_text); a segment whose text lacks a query word, or the literal every match
of the regex contains, is skipped without looking at its messages. Its hits carry `from_archive: true`; `score` is null
(the search backend's ranking does not reach them), so under sort=relevance they come
after the ranked database hits.
"""

from __future__ import annotations

import datetime as dt

import regex
from django.conf import settings

from archive.models import Segment, SegmentState
from archive.search_text import ArchivedMessage, segment_text
from conversations.search.query import Scope
from conversations.search.text import required_literal, snippet_at, snippet_for_words
from core.api.errors import InvalidInput

_WORD = regex.compile(r"\w+")


def _matcher(mode: str, query: str, ignore_case: bool):
    """(prefilter, match): `prefilter(folded)` is false when a segment's case-folded text
    cannot hold a match (never wrongly: it only looks for what every match contains);
    `match(message)` is the snippet of the message's first matching text, or None."""
    if mode == "regex":
        try:
            pattern = regex.compile(query, regex.IGNORECASE if ignore_case else 0)
        except regex.error as error:
            raise InvalidInput(f"invalid regex: {error}", extra={"field": "query"}) from None
        literal = required_literal(query, ignore_case)
        needle = literal.casefold() if literal else None

        def match(message: ArchivedMessage) -> str | None:
            for text, folded in zip(message.texts, message.folded, strict=True):
                if needle is not None and needle not in folded:
                    continue
                found = pattern.search(text, timeout=1.0)
                if found:
                    return snippet_at(text, found.start(), found.end())
            return None

        return (lambda folded: needle is None or needle in folded), match
    words = [w.casefold() for w in _WORD.findall(query)]

    def match_words(message: ArchivedMessage) -> str | None:
        for text, folded in zip(message.texts, message.folded, strict=True):
            if all(w in folded for w in words) and set(words) <= set(_WORD.findall(folded)):
                return snippet_for_words(text, words)
        return None

    return (lambda folded: bool(words) and all(w in folded for w in words)), match_words


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
    prefilter, match = _matcher(mode, query, ignore_case)
    hits: list[dict] = []
    for segment in _segments(scope):
        text = segment_text(segment)
        if not prefilter(text.folded):
            continue
        for message in text.messages:
            created = message.created_at
            if (since and created < since) or (before and created >= before):
                continue
            snippet = match(message)
            if snippet is None:
                continue
            hits.append(
                {
                    "type": "message",
                    "id": message.id,
                    "conversation_id": message.conversation_id,
                    "created_at": created,
                    "snippet": snippet,
                    "score": None,
                    "seq": message.seq,
                    "from_archive": True,
                }
            )
    hits.sort(key=lambda h: (h["created_at"], h["id"]), reverse=True)
    return hits[:limit]
