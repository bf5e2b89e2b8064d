"""Shared fixtures: users of each access level, authenticated API clients, and
conversations built through the real ingest service."""

from __future__ import annotations

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.factories import ConversationFactory, UserFactory, append_messages
from tests.support.tokens import issue_token

pytest_plugins = ["tests.support.fixtures", "tests.support.browser"]


def pytest_collection_modifyitems(config, items):
    """`postgres` tests are skipped on SQLite runs; the PostgreSQL run executes them."""
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(
                pytest.mark.skipif(
                    _vendor() != "postgresql",
                    reason="PostgreSQL-only behaviour (runs in the PostgreSQL suite)",
                )
            )


def _vendor() -> str:
    return connection.vendor


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Tests create many users; the production hasher is deliberately slow."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """Throttle counters live in the process-local cache: no test inherits another's."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def user(db):
    return UserFactory(username="owner")


@pytest.fixture
def other_user(db):
    return UserFactory(username="other")


@pytest.fixture
def staff_user(db):
    return UserFactory(username="staff", is_staff=True)


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(user)}")
    return client


@pytest.fixture
def api(user) -> APIClient:
    """An API client authenticated (by token) as the owner."""
    return token_client(user)


@pytest.fixture
def other_api(other_user) -> APIClient:
    return token_client(other_user)


@pytest.fixture
def staff_api(staff_user) -> APIClient:
    return token_client(staff_user)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()


@pytest.fixture
def conversation(user):
    return ConversationFactory(owner=user)


@pytest.fixture
def make_conversation(user):
    def make(owner=None, messages: int = 0, **kwargs):
        conv = ConversationFactory(owner=owner or user, **kwargs)
        if messages:
            append_messages(conv, messages)
        return conv

    return make


@pytest.fixture
def small_chunks(settings):
    """Compaction settings small enough that a hundred short messages make several leaves
    and a condensed level above them; automatic compaction off (tests compact by hand)."""
    settings.LCM_LEAF_CHUNK_TOKENS = 400
    settings.LCM_LEAF_TARGET_TOKENS = 120
    settings.LCM_CONDENSED_TARGET_TOKENS = 160
    settings.LCM_LEAF_MIN_FANOUT = 4
    settings.LCM_CONDENSED_MIN_FANOUT = 3
    settings.LCM_AUTOCOMPACT_DISABLED = True
    return settings


@pytest.fixture(scope="session", autouse=True)
def _sqlite_flush_may_delete_turns():
    """Turn rows refuse DELETE (turns migration 0002); on SQLite the test flush between
    transactional tests is a DELETE, so it holds the documented permit while it runs."""
    if connection.vendor != "sqlite":  # PostgreSQL flushes with TRUNCATE (no row trigger)
        yield
        return
    DatabaseOperations = type(connection.ops)
    original = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        with self.connection.cursor() as cursor:
            cursor.execute("INSERT INTO turns_delete_permit (permit) VALUES (1)")
        try:
            original(self, sql_list)
        finally:
            with self.connection.cursor() as cursor:
                cursor.execute("DELETE FROM turns_delete_permit")

    DatabaseOperations.execute_sql_flush = execute_sql_flush
    yield
    DatabaseOperations.execute_sql_flush = original
