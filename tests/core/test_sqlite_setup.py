"""A new SQLite file is made with auto_vacuum=INCREMENTAL (retention gives freed pages back
with it); an existing file is left as it is, without a pragma on every connection
(core/sqlite_setup.py)."""

from __future__ import annotations

import sqlite3

import pytest
from django.db import connection
from django.db.backends.sqlite3.base import DatabaseWrapper

NONE, INCREMENTAL = 0, 2


def _wrapper(path) -> DatabaseWrapper:
    return DatabaseWrapper({**connection.settings_dict, "NAME": str(path)}, alias="sqlite_setup")


def _auto_vacuum(wrapper: DatabaseWrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("PRAGMA auto_vacuum")
        return cursor.fetchone()[0]


@pytest.fixture(autouse=True)
def sqlite_only(django_db_blocker):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's file (PostgreSQL has no auto_vacuum pragma)")
    with django_db_blocker.unblock():  # files of the tests' own, not the test database
        yield


def test_a_new_file_is_made_with_incremental_auto_vacuum(tmp_path):
    wrapper = _wrapper(tmp_path / "new.sqlite3")
    try:
        assert _auto_vacuum(wrapper) == INCREMENTAL
        with wrapper.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"
    finally:
        wrapper.close()


def test_an_existing_file_is_left_as_it_is(tmp_path):
    path = tmp_path / "old.sqlite3"
    made = sqlite3.connect(path)
    made.execute("CREATE TABLE kept (x)")
    made.commit()
    made.close()
    wrapper = _wrapper(path)
    try:
        assert _auto_vacuum(wrapper) == NONE  # converted by retention's VACUUM, not here
    finally:
        wrapper.close()
