"""The turn event log: numbering, live and on-disk reads, resume, closing after a crash."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from turns import events


def test_events_are_numbered_from_one_and_written_through():
    channel = events.open_channel("T1")
    first = channel.publish("turn", {"turn_id": "T1"})
    second = channel.publish("delta", {"text": "hi"})
    assert (first.id, second.id) == (1, 2)
    assert [e.id for e in events.read_log("T1")] == [1, 2]  # already on disk
    assert [e.id for e in events.read_log("T1", after=1)] == [2]
    channel.publish("done", {"text": "hi"})
    assert channel.finished
    with pytest.raises(ValueError):
        channel.publish("delta", {"text": "late"})


def test_the_sse_form_carries_id_event_and_json_data():
    item = events.TurnEvent(7, "delta", {"text": "a\nb"})
    assert item.as_sse() == b'id: 7\nevent: delta\ndata: {"text":"a\\nb"}\n\n'


def test_follow_resumes_without_gap_or_duplicate_while_the_turn_runs():
    channel = events.open_channel("T2")

    def produce():
        for n in range(20):
            channel.publish("delta", {"n": n})
            time.sleep(0.005)
        channel.publish("done", {})

    threading.Thread(target=produce).start()
    first = []
    for item in events.follow("T2", 0, is_finished=lambda: False):
        first.append(item)
        if len(first) == 5:
            break  # the client's connection dropped here
    rest = list(events.follow("T2", first[-1].id, is_finished=lambda: False))
    ids = [e.id for e in first + rest]
    assert ids == list(range(1, 22))
    assert rest[-1].event == "done"


def test_a_finished_turn_replays_from_disk_when_no_channel_is_live():
    channel = events.open_channel("T3")
    for n in range(3):
        channel.publish("delta", {"n": n})
    channel.publish("done", {})
    events._channels.clear()  # as another process would see it
    assert [e.id for e in events.follow("T3", 2, is_finished=lambda: True)] == [3, 4]


def test_append_terminal_closes_a_log_once():
    channel = events.open_channel("T4")
    channel.publish("delta", {"n": 0})
    events._channels.clear()  # the runner's process died
    closing = events.append_terminal("T4", "error", {"code": "interrupted"})
    assert closing.id == 2
    assert events.append_terminal("T4", "error", {"code": "interrupted"}) is None
    assert [e.event for e in events.read_log("T4")] == ["delta", "error"]


def test_a_new_runner_continues_the_numbering_on_disk():
    channel = events.open_channel("T5")
    channel.publish("turn", {})
    events._channels.clear()
    again = events.open_channel("T5")
    assert again.publish("delta", {}).id == 2


def test_async_follow_yields_live_events_and_stops_at_the_terminal_one():
    channel = events.open_channel("T6")

    async def finished():
        return False

    async def collect():
        seen = []
        async for item in events.afollow("T6", 0, is_finished=finished):
            seen.append(item.event)
        return seen

    def produce():
        time.sleep(0.05)
        channel.publish("delta", {"text": "a"})
        channel.publish("error", {"code": "x"})

    threading.Thread(target=produce).start()
    assert asyncio.run(collect()) == ["delta", "error"]
