"""Which tests a run executes, and how hard the process tests push (docs/testing.md).

CI runs the suite twice, on SQLite and on PostgreSQL, at the same time. Running a test
twice only pays when the database can change its outcome, so:

- `process` tests (they boot real servers, workers or `manage.py` commands) run once. Those
  about crashes, concurrency and workers run in the PostgreSQL run when there is one (the
  production database); those whose outcome no database changes (a client, the API
  contract, a command's output), marked `process(portable=True)`, run in the SQLite run, so
  the two runs, which go at the same time, end close together. scripts/test passes
  `--process-tests=portable` to the SQLite run and `--process-tests=database` to the
  PostgreSQL run when PostgreSQL is reachable; otherwise the one run executes them all;
- the PostgreSQL run leaves out tests that touch no database (no `django_db` marker, no
  database fixture) unless they are marked `postgres` or `process`: the SQLite run covers them;
- a test marked `once(database=...)` runs in that database's run only when both runs go
  (the other run's `--process-tests` says so), in every run otherwise and in the slow mode:
  a long test whose outcome no database changes (one storage path, no concurrency), or a
  migration test whose cost on the other database buys little (docs/testing.md);
- the crash tests kill their processes fewer times; `--slow` (or LCM_TEST_SLOW=1) runs the
  full counts (nightly, or before touching crash recovery).
"""

from __future__ import annotations

import os

import pytest

SLOW_ENV = "LCM_TEST_SLOW"

# pytest-django's fixtures that open the test database (directly or through `live_server`).
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
        "django_db_setup",
    }
)


def slow() -> bool:
    """The slow mode: `--slow` sets LCM_TEST_SLOW=1 before any test module is imported."""
    return os.environ.get(SLOW_ENV) == "1"


def count(*, ci: int, slow_count: int) -> int:
    """How many kills (or rounds) a crash test makes: `ci` by default, `slow_count` in the
    slow mode. Each kill lands at a seeded random point, so more kills probe more points;
    the default keeps enough of them to cross every phase the test names."""
    return slow_count if slow() else ci


def touches_database(item: pytest.Item) -> bool:
    if item.get_closest_marker("django_db") is not None:
        return True
    return bool(DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


# --process-tests: which process tests this run executes.
PROCESS_CHOICES = ("all", "database", "portable", "none")


def split(items: list[pytest.Item], *, vendor: str, process_tests: str):
    """(kept, deselected) for this run's database and process-test choice."""
    kept, deselected = [], []
    for item in items:
        (kept if _runs_here(item, vendor, process_tests) else deselected).append(item)
    return kept, deselected


def _runs_here(item: pytest.Item, vendor: str, process_tests: str) -> bool:
    once = item.get_closest_marker("once")
    if once is not None and not _once_here(once.kwargs["database"], vendor, process_tests):
        return False
    process = item.get_closest_marker("process")
    if process is not None:
        portable = bool(process.kwargs.get("portable"))
        return process_tests == "all" or process_tests == ("portable" if portable else "database")
    if vendor == "postgresql":
        return item.get_closest_marker("postgres") is not None or touches_database(item)
    return True


def _once_here(database: str, vendor: str, process_tests: str) -> bool:
    """A `once` test's place: scripts/test gives the SQLite run `portable` and the
    PostgreSQL run `none` or `database` only when both runs go."""
    if slow() or process_tests == "all":
        return True
    both = (vendor == "sqlite" and process_tests == "portable") or (
        vendor == "postgresql" and process_tests in ("none", "database")
    )
    return not both or vendor == database
