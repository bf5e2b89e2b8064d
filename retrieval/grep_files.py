"""grep over the stored content of large files (scope "files"), bounded.

Large files live outside the database (`storages["large_files"]`), so there is no index:
the newest `MAX_FILES` files in scope are read (at most `MAX_BYTES` in all) and matched
line by line, full text as case-insensitive words (all must be on one line), regex with
the `regex` package's timeout. The search stops at `limit` hits or at
LCM_GREP_TIMEOUT_MS (a SearchTimeout, as for the other scopes).
"""

from __future__ import annotations

import time

from django.conf import settings

from conversations.search import Scope, SearchTimeout
from conversations.search.text import compile_regex, query_words, snippet_at
from largefiles.models import LargeFile
from largefiles.store import file_storage

MAX_FILES = 200
MAX_BYTES = 64 * 1024 * 1024


def _files_in(scope: Scope, request):
    files = LargeFile.objects.all()
    if scope.conversation_ids is not None:
        files = files.filter(conversation_id__in=scope.conversation_ids)
    elif scope.owner_id is not None:
        files = files.filter(conversation__owner_id=scope.owner_id)
    if request.since:
        files = files.filter(created_at__gte=request.since)
    if request.before:
        files = files.filter(created_at__lt=request.before)
    return files.order_by("-created_at", "-id")[:MAX_FILES]


def _matcher(request):
    if request.mode == "regex":
        pattern = compile_regex(request.query, request.ignore_case)
        return lambda line, timeout: (
            (m.start(), m.end()) if (m := pattern.search(line, timeout=timeout)) else None
        )
    words = [w.casefold() for w in query_words(request.query)]

    def words_match(line, timeout):
        folded = line.casefold()
        if len(folded) != len(line) or not all(w in folded for w in words):
            return None
        at = folded.find(words[0])
        return at, at + len(words[0])

    return words_match


def grep_files(*, scope: Scope, request) -> list[dict]:
    deadline = time.monotonic() + settings.LCM_GREP_TIMEOUT_MS / 1000
    match = _matcher(request)
    storage = file_storage()
    budget = MAX_BYTES
    results: list[dict] = []
    for large_file in _files_in(scope, request):
        if budget <= 0:
            break
        with storage.open(large_file.storage_key, "rb") as handle:
            data = handle.read(budget)
        budget -= len(data)
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timeout()
            try:
                span = match(line, remaining)
            except TimeoutError:
                raise _timeout() from None
            if span:
                results.append(
                    {
                        "type": "file",
                        "id": large_file.pk,
                        "conversation_id": large_file.conversation_id,
                        "created_at": large_file.created_at,
                        "snippet": snippet_at(line, *span),
                        "score": None,
                        "file_name": large_file.file_name,
                        "line": number,
                    }
                )
                break  # one hit per file: the first matching line
        if len(results) >= request.limit:
            break
    return results


def _timeout() -> SearchTimeout:
    ms = settings.LCM_GREP_TIMEOUT_MS
    return SearchTimeout(
        f"the file search took longer than {ms} ms and was stopped", extra={"timeout_ms": ms}
    )
