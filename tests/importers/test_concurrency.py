"""Two imports of the same lossless-claw database at once, for the same user: exactly the
source's rows, once (PostgreSQL: real concurrent transactions)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from conversations.models import Message, Summary, SummaryMessage
from importers.services import import_file
from tests.factories import UserFactory


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_imports_of_one_database_write_every_row_once(lc_fixture):
    user = UserFactory(username="racer")
    reports, errors = [], []
    start = threading.Barrier(2)

    def run():
        try:
            start.wait()
            reports.append(
                import_file(
                    format="lossless-claw",
                    path=lc_fixture / "lcm.db",
                    owner=user,
                    files_dir=lc_fixture / "lcm-files",
                )
            )
        except Exception as error:  # surfaced by the assertion below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert [c.failed for r in reports for c in r.conversations] == ["", "", "", ""]
    assert Message.objects.filter(conversation__owner=user).count() == 720
    assert Summary.objects.filter(conversation__owner=user).count() == 32
    assert SummaryMessage.objects.filter(conversation__owner=user).count() == 688
    assert sum(r.totals()["messages"] for r in reports) == 720
