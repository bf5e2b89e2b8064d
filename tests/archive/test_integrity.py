"""Integrity checks cover the archive: a clean archive reports nothing; a missing or corrupt
segment, or a message pointing to no segment, is a named problem with a repair plan."""

from __future__ import annotations

from archive.services import segment_archive
from integrity.checks import Scope
from integrity.plans import plan_repairs
from integrity.report import scan
from tests.integrity.seeding import rules_bypassed, sql  # noqa: F401  (fixture)

ARCHIVE_CHECKS = ("archived_message_unplaced", "archive_segment_missing", "archive_segment_corrupt")


def _archive_problems(conversation):
    result = scan(Scope(conversation_id=conversation.pk))
    counts = result.counts()
    return result, {name: counts.get(name, 0) for name in (*ARCHIVE_CHECKS, "token_count_mismatch")}


def test_a_clean_archive_reports_no_problem(compacted):
    conversation, _ = compacted
    before, _ = _archive_problems(conversation)
    segment_archive(conversation=conversation, seq_from=1, seq_to=40)

    result, counts = _archive_problems(conversation)

    assert {name: counts[name] for name in ARCHIVE_CHECKS} == dict.fromkeys(ARCHIVE_CHECKS, 0)
    # Archived messages keep their token counts: no new mismatch (the test DAG's summaries
    # carry made-up counts, reported before and after alike).
    assert result.counts() == before.counts()
    messages = next(o.problems for o in result.outcomes if o.name == "token_count_mismatch")
    assert [p for p in messages if p["kind"] == "message"] == []


def test_a_missing_segment_is_reported_with_a_plan(compacted, archive_folder):
    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=40).segment
    (archive_folder / segment.key).unlink()

    result, counts = _archive_problems(conversation)

    assert counts["archive_segment_missing"] == 1
    assert counts["archive_segment_corrupt"] == 0
    [problem] = next(o.problems for o in result.outcomes if o.name == "archive_segment_missing")
    assert problem["segment_id"] == segment.pk and problem["seq_range"] == [1, 40]
    [action] = [
        a for a in plan_repairs(result)[conversation.pk] if a["check"] == "archive_segment_missing"
    ]
    assert action["automatic"] is False
    assert "replica" in action["description"]


def test_a_corrupt_segment_is_reported(compacted, archive_folder):
    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=40).segment
    path = archive_folder / segment.key
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))

    result, counts = _archive_problems(conversation)

    assert counts["archive_segment_corrupt"] == 1
    [problem] = next(o.problems for o in result.outcomes if o.name == "archive_segment_corrupt")
    assert problem["reason"] == "object_hash"


def test_a_message_pointing_to_no_segment_is_reported(compacted, rules_bypassed):  # noqa: F811
    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=40).segment
    rules_bypassed()
    sql("UPDATE conversations_message SET archived_in = %s WHERE conversation_id = %s AND seq = 3",
        [segment.pk + 1000, conversation.pk])  # fmt: skip

    result, counts = _archive_problems(conversation)

    assert counts["archived_message_unplaced"] == 1
    [problem] = next(o.problems for o in result.outcomes if o.name == "archived_message_unplaced")
    assert (problem["seq"], problem["segment_id"]) == (3, segment.pk + 1000)
    # ... and its segment no longer matches the rows that point to it.
    assert counts["archive_segment_corrupt"] == 1


def test_a_lost_segment_reads_as_a_503_and_marking_it_missing_is_audited(
    compacted, archive_folder, api
):
    import json
    from io import StringIO

    import pytest
    from django.core.management import CommandError, call_command

    from archive.models import SegmentState
    from archive.selectors import forget
    from security.models import AuditEvent

    conversation, _ = compacted
    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=40).segment
    (archive_folder / segment.key).unlink()
    forget()
    url = f"/api/v1/conversations/{conversation.pk}/messages/?limit=100"

    lost = api.get(url)

    assert lost.status_code == 503
    assert lost.json()["code"] == "archive_unavailable"
    with pytest.raises(CommandError, match="--confirm"):
        call_command("lcm_retention", "mark-missing", "--segment", str(segment.pk))
    segment.refresh_from_db()
    assert segment.state == SegmentState.ACTIVE and AuditEvent.objects.count() == 0

    out = StringIO()
    call_command("lcm_retention", "mark-missing", "--segment", str(segment.pk),
                 "--confirm", str(segment.pk), "--json", stdout=out)  # fmt: skip

    assert json.loads(out.getvalue()) == {"segment": segment.pk, "marked_missing": True}
    segment.refresh_from_db()
    assert segment.state == SegmentState.MISSING
    [event] = AuditEvent.objects.all()
    assert (event.action, event.target_id) == ("archive.segment_marked_missing", str(segment.pk))
    _, counts = _archive_problems(conversation)
    assert {name: counts[name] for name in ARCHIVE_CHECKS} == dict.fromkeys(ARCHIVE_CHECKS, 0)
    after = api.get(url)
    assert after.status_code == 503 and "is lost" in after.json()["message"]
