"""Shared fixtures: users of each access level, authenticated API clients, and
conversations built through the real ingest service."""

from __future__ import annotations

import os

import pytest
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from core.config import SETTINGS_BY_NAME
from tests.factories import ConversationFactory, UserFactory, append_messages
from tests.support import suite
from tests.support.tokens import issue_token

pytest_plugins = ["tests.support.fixtures", "tests.support.browser"]

# Tests embed with the lexical `hashing` backend: no 91 MB model to load, in this process
# or in the servers and workers the process tests start (they inherit this environment).
# Tests of embeddings and recall quality ask for the real model with
# `@pytest.mark.embedding_model`. Django's settings are loaded before this file, so the
# session fixture below sets them too.
os.environ["LCM_EMBEDDING_BACKEND"] = "hashing"
TEST_SETTINGS = {
    "LCM_EMBEDDING_BACKEND": "hashing",
    # Tests create many users; the production hasher is deliberately slow.
    "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],
}


def pytest_addoption(parser):
    group = parser.getgroup("lcm", "LCM test suite (docs/testing.md)")
    group.addoption(
        "--slow",
        action="store_true",
        help="crash tests make their full number of kills (also: LCM_TEST_SLOW=1)",
    )
    group.addoption(
        "--process-tests",
        choices=suite.PROCESS_CHOICES,
        default="all",
        help="which `process` tests run: all (default); database: those about crashes and "
        "workers; portable: those marked process(portable=True); none (scripts/test: the "
        "SQLite run takes the portable ones, the PostgreSQL run the others)",
    )


def pytest_configure(config):
    if config.getoption("--slow"):  # before any test module reads it at import
        os.environ[suite.SLOW_ENV] = "1"


def pytest_report_header(config):
    mode = "slow (full kill counts)" if suite.slow() else "default (LCM_TEST_SLOW=1 for full)"
    return [f"lcm: database {_vendor()}; crash tests {mode}"]


def pytest_collection_modifyitems(config, items):
    """`postgres` tests are skipped on SQLite runs; the PostgreSQL run executes them. The
    run's share of the suite: tests/support/suite.py."""
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(
                pytest.mark.skipif(
                    _vendor() != "postgresql",
                    reason="PostgreSQL-only behaviour (runs in the PostgreSQL suite)",
                )
            )
    kept, deselected = suite.split(
        items, vendor=_vendor(), process_tests=config.getoption("--process-tests")
    )
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def _vendor() -> str:
    return connection.vendor


@pytest.fixture(scope="session", autouse=True)
def _test_settings():
    with override_settings(**TEST_SETTINGS):
        yield


@pytest.fixture(autouse=True)
def _embedding_model(request):
    """`@pytest.mark.embedding_model`: this test (and any process it starts) embeds with the
    configured model, as production does."""
    if request.node.get_closest_marker("embedding_model") is None:
        return
    default = SETTINGS_BY_NAME["LCM_EMBEDDING_BACKEND"].default
    request.getfixturevalue("settings").LCM_EMBEDDING_BACKEND = default
    request.getfixturevalue("monkeypatch").setenv("LCM_EMBEDDING_BACKEND", default)


@pytest.fixture(scope="session")
def openapi_schema():
    """The OpenAPI schema, generated once per run (read it, do not change it)."""
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


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
def data_dir(settings, tmp_path):
    """Stream journals, event logs and other files under LCM_DATA_DIR go to this test's own
    directory."""
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    return settings.DATA_DIR


@pytest.fixture
def offline_engine(settings, monkeypatch, data_dir):
    """Turns run offline: no model config or keys from the environment (the offline provider,
    no network), the deterministic librarian, journals under a fresh data directory. Autouse
    in tests/turns and tests/memory."""
    for name in ("LCM_CONFIG_FILE", "LCM_DEFAULT_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    settings.LCM_LIBRARIAN_MODEL = "haiku"  # no key set: the deterministic librarian


@pytest.fixture
def fresh_vector_caches():
    """Empty per-process vector matrices: summary ids are derived from their sources, so a
    rolled-back test's summary id comes back in the next test with other content, which the
    cache's staleness check (by id) cannot see. Autouse in tests/memory."""
    from memory.vectors.numpy_exact import INDEX, SUMMARY_INDEX

    INDEX.reset()
    SUMMARY_INDEX.reset()


@pytest.fixture
def chat(user):
    """A chat session of the owner, made through the real turn service."""
    from turns import services

    return services.session_create(owner=user, title="chat")


@pytest.fixture
def compacted(conversation):
    """48 messages: 4 leaves of 10 under one depth-1 summary, and an 8-message tail (seq 41-48
    stay in the active context); returns (conversation, the BuiltDag). Explorer and integrity
    tests and two retrieval modules override it with their own shapes."""
    from tests.retrieval.dag_builder import build_dag

    append_messages(conversation, 48)
    return conversation, build_dag(conversation, leaf_size=10, fanout=4, max_depth=1, tail=8)


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
