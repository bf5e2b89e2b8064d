"""A JSON column's object (a tool call's input) keeps its key order through the archive:
reads, exports and restores are byte-identical, not merely equal as JSON (found by the
retention benchmark's agent corpus, whose tool inputs have several keys)."""

from __future__ import annotations

from django.db import connection

from archive.services import segment_archive, segment_restore
from conversations.inputs import parse_message
from conversations.services import messages_append
from importers.exporters import export_jsonl
from tests.retrieval.dag_builder import build_dag

INPUT = {"path": "src/upload/views_0.py", "offset": 0, "limit": 40, "encoding": "utf-8"}


def _call(i: int) -> dict:
    return {
        "role": "assistant",
        "content": f"I will read the file ({i}).",
        "parts": [
            {"part_type": "text", "text_content": f"I will read the file ({i})."},
            {"part_type": "tool", "tool_name": "read_file", "tool_call_id": f"toolu_{i:04d}",
             "tool_input": {**INPUT, "offset": i}, "tool_status": "completed"},
        ],
    }  # fmt: skip


def _stored_inputs(conversation) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CAST(p.tool_input AS TEXT) FROM conversations_messagepart p "
            "JOIN conversations_message m ON m.id = p.message_id "
            "WHERE m.conversation_id = %s AND p.tool_input IS NOT NULL ORDER BY m.seq",
            [conversation.pk],
        )
        return [row[0] for row in cursor.fetchall()]


def test_tool_inputs_keep_their_key_order_through_archive_and_restore(conversation):
    messages_append(conversation_id=conversation.pk,
                    messages=[parse_message(_call(i)) for i in range(12)])  # fmt: skip
    build_dag(conversation, leaf_size=4, fanout=2, max_depth=1, tail=4)
    stored = _stored_inputs(conversation)
    export_before = list(export_jsonl(conversation))

    segment = segment_archive(conversation=conversation, seq_from=1, seq_to=8).segment

    assert segment is not None and segment.message_count == 8
    assert list(export_jsonl(conversation)) == export_before
    segment_restore(segment=segment)
    assert _stored_inputs(conversation) == stored
    assert list(export_jsonl(conversation)) == export_before
