"""Retention gives the space it freed back: a SQLite file shrinks after archiving (an older
file, made without auto-vacuum, is converted by its first run), and every run says the
database's size before and after, on both databases."""

from __future__ import annotations

import json
import random
import string
from functools import partial
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from conversations.models import Conversation
from retention.models import RetentionPolicy
from retention.storage import INCREMENTAL, NONE
from tests.factories import ConversationFactory, append_messages
from tests.retrieval.dag_builder import build_dag

pytestmark = pytest.mark.django_db(transaction=True)  # VACUUM runs outside a transaction


def _big(i: int, *, size: int) -> dict:
    words = random.Random(i).choices(string.ascii_lowercase, k=size)
    return {"role": "user" if i % 2 else "assistant", "content": f"Message {i}: " + "".join(words)}


def _archivable(user, *, messages: int, size: int) -> Conversation:
    conversation = ConversationFactory(owner=user)
    append_messages(conversation, messages, payload=partial(_big, size=size))
    build_dag(conversation, leaf_size=10, fanout=4, max_depth=1, tail=8)
    RetentionPolicy.objects.create(conversation=conversation, keep_newest_tokens=1)
    return conversation


def _apply() -> tuple[dict, str]:
    out = StringIO()
    call_command("lcm_retention", "apply", "--json", stdout=out, stderr=StringIO())
    data = json.loads(out.getvalue())
    text = StringIO()
    call_command("lcm_retention", "status", stdout=text)
    return data, text.getvalue()


def _auto_vacuum() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        return cursor.fetchone()[0]


def test_each_run_says_the_database_size_before_and_after(user):
    _archivable(user, messages=48, size=200)
    data, _ = _apply()
    space = data["database"]
    assert space["before_bytes"] > 0 and space["after_bytes"] > 0
    assert data["messages"] == 40
    out = StringIO()
    call_command("lcm_retention", "apply", stdout=out, stderr=StringIO())
    assert "database " in out.getvalue() and " bytes" in out.getvalue()


def test_a_sqlite_file_shrinks_after_archiving_and_an_old_one_is_converted_once(user):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's file (PostgreSQL: each run reports its size, test above)")
    with connection.cursor() as cursor:  # a file made before auto-vacuum was on
        cursor.execute(f"PRAGMA auto_vacuum={NONE}")
        cursor.execute("VACUUM")
    assert _auto_vacuum() == NONE

    _archivable(user, messages=48, size=8_000)
    first, _ = _apply()
    space = first["database"]
    assert first["messages"] == 40 and space["action"] == "vacuum"
    assert _auto_vacuum() == INCREMENTAL
    freed = space["before_bytes"] - space["after_bytes"]
    assert freed > 0.5 * 40 * 8_000, space  # most of the archived text left the file

    # A small run (under a tenth of the file): the wholly free pages go, no rewrite.
    kept = ConversationFactory(owner=user)
    append_messages(kept, 60, payload=partial(_big, size=8_000))  # no policy: stays
    _archivable(user, messages=48, size=1_000)
    second, _ = _apply()
    space = second["database"]
    assert second["messages"] == 40 and space["action"] == "incremental_vacuum"
    assert space["after_bytes"] <= space["before_bytes"]

    out = StringIO()  # asked for: the file rewritten whole
    call_command("lcm_retention", "apply", "--vacuum", "--json", stdout=out, stderr=StringIO())
    assert json.loads(out.getvalue())["database"]["action"] == "vacuum"
