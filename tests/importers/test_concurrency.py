"""Two imports of the same lossless-claw database at once, for the same user: exactly the
source's rows, once (PostgreSQL: real concurrent transactions)."""

from __future__ import annotations

import pytest

from conversations.models import Message, Summary, SummaryMessage
from importers.services import import_file
from tests.factories import UserFactory
from tests.support.concurrent import run_together


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_imports_of_one_database_write_every_row_once(lc_fixture):
    user = UserFactory(username="racer")

    def run():
        return import_file(
            format="lossless-claw",
            path=lc_fixture / "lcm.db",
            owner=user,
            files_dir=lc_fixture / "lcm-files",
        )

    reports = run_together(run, times=2, timeout=120)
    assert [c.failed for r in reports for c in r.conversations] == ["", "", "", ""]
    assert Message.objects.filter(conversation__owner=user).count() == 720
    assert Summary.objects.filter(conversation__owner=user).count() == 32
    assert SummaryMessage.objects.filter(conversation__owner=user).count() == 688
    assert sum(r.totals()["messages"] for r in reports) == 720
