"""The gram index of unspaced-script text (CJK, Thai, ...), for words of 1-2 characters.

A trigram index cannot serve a word shorter than three characters. Every character of an
unspaced-script run and every pair of adjacent ones is indexed instead (migration 0004),
and a search for such a word keeps only rows whose grams hold all of the word's
(`conversations.search.text.unspaced_grams`), then checks the text itself: exact.

PostgreSQL computes the grams in SQL (a stored generated column). SQLite has no regular
expressions in SQL, so its triggers call `lcm_cjk_grams(content)`, a deterministic
function registered on every connection Django opens (`register`, connected to
`connection_created` by the app). A client that opens the SQLite file without it can
still read, but cannot insert a message or summary holding such text.
"""

from __future__ import annotations

import json
import re

from conversations.search.text import NO_SPACE_CLASS

_RUN = re.compile(f"{NO_SPACE_CLASS}+")


def grams_of(content: str | None) -> list[str]:
    """Every unspaced-script character and pair of adjacent ones, once each."""
    if not content:
        return []
    grams: dict[str, None] = {}
    for run in _RUN.findall(content):
        for index, char in enumerate(run):
            grams[char] = None
            if index + 1 < len(run):
                grams[run[index : index + 2]] = None
    return list(grams)


def sqlite_grams(content: str | None) -> str | None:
    """`lcm_cjk_grams` for SQLite: the grams as a JSON array (read with json_each)."""
    grams = grams_of(content)
    return json.dumps(grams, ensure_ascii=False) if grams else None


def register(sender=None, connection=None, **kwargs) -> None:
    """`connection_created` receiver: give a new SQLite connection `lcm_cjk_grams`."""
    if connection is not None and connection.vendor == "sqlite":
        connection.connection.create_function("lcm_cjk_grams", 1, sqlite_grams, deterministic=True)
