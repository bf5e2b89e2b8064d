"""Stream journals: the flush and fsync policy, byte accounting, torn lines, recovery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from turns import journal as J


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def test_each_entry_has_the_srd_fields_and_increasing_seq():
    journal = J.StreamJournal(step_id="01STEP", provider="anthropic")
    journal.write("message_start", {"message": {"id": "msg_1"}})
    journal.write("lcm.text", {"index": 0, "text": "héllo"}, shown="héllo")
    journal.close()
    entries = _lines(J.journal_path("01STEP"))
    assert [e["event_type"] for e in entries] == [
        J.OPEN_EVENT,
        "message_start",
        "lcm.text",
        J.CLOSE_EVENT,
    ]
    assert [e["seq"] for e in entries] == [1, 2, 3, 4]
    assert all(set(e) == {"ts", "provider", "event_type", "seq", "payload"} for e in entries)
    assert entries[2]["payload"] == {"index": 0, "text": "héllo"}
    assert entries[0]["payload"]["pid"] == os.getpid()


def test_small_writes_stay_buffered_until_the_flush_interval():
    policy = J.FlushPolicy(flush_ms=300, flush_bytes=8192, fsync_ms=2000)
    journal = J.StreamJournal(step_id="01BUF", provider="offline", policy=policy)
    path = J.journal_path("01BUF")
    size_after_open = path.stat().st_size
    journal.write("message_start", {"message": {"id": "msg_1"}})  # a wire event, no output
    assert path.stat().st_size == size_after_open  # still in memory
    deadline = time.monotonic() + 2
    while path.stat().st_size == size_after_open and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.stat().st_size > size_after_open  # the flusher handed it to the OS
    journal.close()


def test_output_shown_to_the_client_reaches_the_os_before_it_is_shown():
    policy = J.FlushPolicy(flush_ms=60_000, flush_bytes=1 << 20, fsync_ms=60_000)
    journal = J.StreamJournal(step_id="01SHOWN", provider="offline", policy=policy)
    journal.write("content_block_delta", {"delta": {"text": "hi"}})
    journal.write("lcm.text", {"index": 0, "text": "hi"}, shown="hi")
    kinds = [e["event_type"] for e in J.read_entries(J.journal_path("01SHOWN"))]
    assert kinds == [J.OPEN_EVENT, "content_block_delta", "lcm.text"]
    assert journal.durable == 0  # on disk for the OS, not yet fsynced
    journal.close()


def test_a_large_write_is_flushed_at_once():
    policy = J.FlushPolicy(flush_ms=60_000, flush_bytes=1024, fsync_ms=60_000)
    journal = J.StreamJournal(step_id="01BIG", provider="offline", policy=policy)
    path = J.journal_path("01BIG")
    journal.write("message_delta", {"padding": "x" * 2000})
    assert b"x" * 2000 in path.read_bytes()
    journal.close()


def test_durable_bytes_follow_fsync_and_reach_displayed_at_close():
    seen = []
    policy = J.FlushPolicy(flush_ms=50, flush_bytes=8192, fsync_ms=200)
    journal = J.StreamJournal(
        step_id="01DUR",
        provider="offline",
        policy=policy,
        on_durable=lambda displayed, durable: seen.append((displayed, durable)),
    )
    journal.write("lcm.text", {"index": 0, "text": "abc"}, shown="abc")
    assert (journal.displayed, journal.durable) == (3, 0)
    deadline = time.monotonic() + 3
    while journal.durable < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert journal.durable == 3
    journal.write("lcm.text", {"index": 0, "text": "déf"}, shown="déf")
    assert journal.displayed == 7  # UTF-8 bytes: é is two
    assert journal.close() == (7, 7)
    assert seen[-1] == (7, 7)
    assert all(durable <= displayed for displayed, durable in seen)


def test_a_closed_journal_refuses_writes():
    journal = J.StreamJournal(step_id="01CLS", provider="offline")
    journal.close()
    with pytest.raises(ValueError):
        journal.write("lcm.text", {"index": 0, "text": "late"})


def test_recovery_skips_a_torn_last_line_and_rebuilds_text_and_tool_calls():
    journal = J.StreamJournal(step_id="01REC", provider="anthropic")
    journal.write("lcm.text", {"index": 0, "text": "Let me "}, shown="Let me ")
    journal.write("lcm.text", {"index": 0, "text": "look."}, shown="look.")
    journal.write("lcm.tool_call", {"index": 1, "call_id": "toolu_1", "name": "lcm_grep"})
    journal.write("lcm.tool_input", {"index": 1, "partial_json": '{"query": '})
    journal.write("lcm.tool_input", {"index": 1, "partial_json": '"RA-2198"}'})
    journal.abandon()  # the process died: no close marker
    with open(J.journal_path("01REC"), "ab") as handle:
        handle.write(b'{"ts": 1, "provider": "anthropic", "event_type": "lcm.te')  # torn
    step = SimpleNamespace(id="01REC", stream_path=str(J.journal_path("01REC")))
    recovered = J.recover_step(step)
    assert recovered.text == "Let me look."
    assert recovered.ended is False
    assert recovered.blocks == [
        {"type": "text", "text": "Let me look.", "annotations": []},
        {"type": "tool_use", "id": "toolu_1", "name": "lcm_grep", "input": {"query": "RA-2198"}},
    ]
    assert recovered.displayed_bytes == len(b"Let me look.")


def test_a_journal_with_its_close_marker_is_ended_and_not_alive():
    journal = J.StreamJournal(step_id="01END", provider="offline")
    step = SimpleNamespace(id="01END", stream_path=None)
    assert J.recover_step(step).writer_alive is True  # open in this very process
    journal.close()
    recovered = J.recover_step(step)
    assert recovered.ended is True
    assert recovered.writer_alive is False


def test_a_journal_whose_writer_process_died_is_not_alive(tmp_path):
    path = J.journal_path("01DEAD")
    code = (
        "import json, os, socket; "
        f"open({str(path)!r}, 'w').write(json.dumps({{'ts': 0, 'provider': 'x', "
        f"'event_type': {J.OPEN_EVENT!r}, 'seq': 1, 'payload': "
        "{'host': socket.gethostname(), 'pid': os.getpid()}}) + '\\n')"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert J.writer_alive(path) is False
    # The same journal "written" by a live process of this host is alive.
    entries = J.read_entries(path)
    entries[0]["payload"]["pid"] = os.getppid()
    assert J.writer_alive(path, entries) is True


def test_a_missing_journal_recovers_as_empty():
    recovered = J.recover_step(SimpleNamespace(id="01NONE", stream_path=None))
    assert (recovered.text, recovered.blocks, recovered.entries) == ("", [], 0)
    assert recovered.writer_alive is False
