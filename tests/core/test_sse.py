"""core/sse.py writes every Server-Sent Events frame (turn streams, drop-in wires): the
exact bytes each wire sent before it moved there."""

from __future__ import annotations

from core.sse import sse_comment, sse_frame, sse_retry


def test_a_frame_with_an_id_and_an_event_is_the_turn_streams_shape():
    assert sse_frame('{"a":1}', event="delta", event_id=7) == (
        b'id: 7\nevent: delta\ndata: {"a":1}\n\n'
    )


def test_a_frame_with_only_an_event_is_the_anthropic_wires_shape():
    assert sse_frame('{"type": "ping"}', event="ping") == (
        b'event: ping\ndata: {"type": "ping"}\n\n'
    )


def test_a_data_only_frame_is_the_openai_wires_shape():
    assert sse_frame('{"id": "x"}') == b'data: {"id": "x"}\n\n'
    assert sse_frame("[DONE]") == b"data: [DONE]\n\n"


def test_an_id_of_zero_is_written():
    assert sse_frame("{}", event_id=0) == b"id: 0\ndata: {}\n\n"


def test_text_beyond_ascii_is_utf8():
    assert sse_frame('"café"') == 'data: "café"\n\n'.encode()


def test_retry_and_comment_lines():
    assert sse_retry(1000) == b"retry: 1000\n\n"
    assert sse_comment("ping") == b": ping\n\n"
