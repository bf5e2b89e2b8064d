"""The fake provider servers speak SSE on the wire exactly as the APIs document it."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from tests.support.fake_messages_api import FakeMessagesAPI, anthropic_text_stream
from tests.support.fake_responses_api import FakeResponsesAPI, responses_text_stream


def post(base_url: str, path: str, body: dict) -> http.client.HTTPResponse:
    host, port = base_url.removeprefix("http://").split("/")[0].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    connection.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    return connection.getresponse()


def test_an_anthropic_stream_is_event_and_data_lines_in_chunked_encoding():
    with FakeMessagesAPI() as api:
        api.enqueue(anthropic_text_stream("hi", chunks=1, ping=False))
        response = post(
            api.base_url, "/v1/messages", {"model": "m", "max_tokens": 5, "messages": []}
        )
        assert response.status == 200
        assert response.getheader("content-type") == "text/event-stream; charset=utf-8"
        assert response.getheader("transfer-encoding") == "chunked"
        body = response.read().decode()
    frames = body.split("\n\n")
    assert frames[-1] == ""  # every event ends with a blank line
    names = [frame.split("\n")[0] for frame in frames[:-1]]
    assert names == [
        "event: message_start",
        "event: content_block_start",
        "event: content_block_delta",
        "event: content_block_stop",
        "event: message_delta",
        "event: message_stop",
    ]
    delta = frames[2].split("\n")[1]
    assert delta == (
        'data: {"type": "content_block_delta", "index": 0, '
        '"delta": {"type": "text_delta", "text": "hi"}}'
    )


def test_a_responses_stream_numbers_its_events():
    with FakeResponsesAPI() as api:
        api.enqueue(responses_text_stream("hi", chunks=1))
        response = post(api.base_url, "/v1/responses", {"model": "m", "input": []})
        body = response.read().decode()
    events = [
        json.loads(line.removeprefix("data: "))
        for line in body.split("\n")
        if line.startswith("data: ")
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created" and events[-1]["type"] == "response.completed"


def test_a_dropped_stream_ends_without_the_closing_chunk():
    with FakeMessagesAPI() as api:
        api.enqueue(anthropic_text_stream("hello", drop_after=2))
        response = post(
            api.base_url, "/v1/messages", {"model": "m", "max_tokens": 5, "messages": []}
        )
        with pytest.raises(http.client.IncompleteRead):
            response.read()


def test_a_slow_stream_waits_before_each_event_and_stops_at_once_on_shutdown():
    api = FakeMessagesAPI().start()
    api.enqueue(anthropic_text_stream("abc", chunks=3).slowly(0.1))
    started = time.monotonic()
    post(api.base_url, "/v1/messages", {"model": "m", "max_tokens": 5, "messages": []}).read()
    assert time.monotonic() - started >= 0.85  # 9 events, 0.1 s before each
    api.enqueue(anthropic_text_stream("abc").slowly(60))
    response = post(api.base_url, "/v1/messages", {"model": "m", "max_tokens": 5, "messages": []})
    stopping = time.monotonic()
    api.stop()
    assert time.monotonic() - stopping < 5
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        response.read()


def test_the_responses_fake_refuses_a_body_without_input_like_the_real_api():
    with FakeResponsesAPI() as api:
        api.enqueue(responses_text_stream("never"))
        response = post(api.base_url, "/v1/responses", {"model": "m"})
        assert response.status == 400
        assert json.loads(response.read())["error"]["message"] == (
            "Missing required parameter: 'input'."
        )
        assert api.pending == 1  # the script was not used up
