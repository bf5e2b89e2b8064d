"""LargeFile moved from the conversations app to its own by state-only migrations: a
database written before the move (rows made through the historical models) migrates
forward with every row, key and reference intact, and back again."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from largefiles.models import LargeFile

# The move is state-only (no SQL of its own), but going back and forth re-runs every later
# migration: on SQLite, table rebuilds that made these two tests a tenth of CI's SQLite run.
# Run once, on PostgreSQL, when CI runs both; every run in the slow mode (docs/testing.md).
pytestmark = pytest.mark.once(database="postgresql")

BEFORE = [
    ("conversations", "0006_cjk_triggers_skip_ascii"),
    ("importers", "0001_initial"),
    ("largefiles", None),
]
AFTER = [
    ("conversations", "0007_large_file_moved_out"),
    ("importers", "0002_large_file_in_its_own_app"),
    ("largefiles", "0001_initial"),
]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state([t for t in targets if t[1]]).apps


@pytest.fixture(autouse=True)
def _latest_schema_after():
    """Going back to BEFORE also unapplies every later migration that depends on it (other
    apps' too: archive, retention, dropin); put the whole schema back for the tests after."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def _table_rows(table: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} ORDER BY 1")
        return cursor.fetchall()


@pytest.mark.django_db(transaction=True)
def test_a_database_from_before_the_move_keeps_every_large_file_row(user):
    old = _migrate(BEFORE)
    with pytest.raises(LookupError):
        old.get_model("largefiles", "LargeFile")
    Conversation = old.get_model("conversations", "Conversation")
    OldLargeFile = old.get_model("conversations", "LargeFile")
    ImportedFile = old.get_model("importers", "ImportedFile")
    conversation = Conversation.objects.create(
        owner_id=user.pk, session_id="before-the-move", token_budget=1000
    )
    for n in range(3):
        OldLargeFile.objects.create(
            id=f"file_{n:016x}",
            conversation_id=conversation.pk,
            file_name=f"report-{n}.csv",
            mime_type="text/csv",
            byte_size=1000 + n,
            line_count=10 + n,
            token_count=300 + n,
            sha256=f"{n:064x}",
            storage_key=f"large-files/{conversation.pk}/file_{n:016x}.csv",
            exploration_summary=f"a table of {10 + n} lines",
            tool_name="read_file" if n == 2 else "",
        )
    ImportedFile.objects.create(
        large_file_id="file_0000000000000001", source_id="src-1", source_uri="/x/1.csv"
    )
    before = _table_rows("conversations_largefile")

    _migrate(AFTER)

    assert _table_rows("conversations_largefile") == before
    moved = LargeFile.objects.filter(conversation_id=conversation.pk).order_by("id")
    assert [f.file_name for f in moved] == ["report-0.csv", "report-1.csv", "report-2.csv"]
    assert moved[2].tool_name == "read_file"
    assert LargeFile.objects.get(pk="file_0000000000000001").import_source.source_id == "src-1"
    # The database still refuses what it refused before the move (constraints unchanged).
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        LargeFile.objects.create(
            id="not_prefixed", conversation_id=conversation.pk, byte_size=1,
            sha256="f" * 64, storage_key="k",
        )  # fmt: skip

    # And back: the state moves, the rows stay.
    _migrate(BEFORE)
    assert _table_rows("conversations_largefile") == before
    _migrate(AFTER)


@pytest.mark.django_db(transaction=True)
def test_the_content_type_follows_the_model():
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.filter(model="largefile").delete()
    _migrate(BEFORE)
    ContentType.objects.create(app_label="conversations", model="largefile")
    _migrate(AFTER)
    assert list(
        ContentType.objects.filter(model="largefile").values_list("app_label", flat=True)
    ) == ["largefiles"]
