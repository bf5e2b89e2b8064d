"""Large files at ingest: intercepted before anything is stored, stored through the storage
API under a safe key, deduplicated by content, and never half-written."""

from __future__ import annotations

import hashlib
import json
import re
from functools import partial

import pytest
from django.db import connection

from conversations.inputs import parse_message
from conversations.models import ContextItem, Conversation, Message, MessagePart
from conversations.services import messages_append
from core.api.errors import InvalidInput
from core.token_estimate import estimate
from largefiles.models import LargeFile
from largefiles.store import file_storage
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.support.concurrent import run_together

pytestmark = pytest.mark.usefixtures("large_file_storage")

THRESHOLD = 1000  # tokens; small so the tests stay small
REFERENCE = re.compile(
    r"\[LCM File: (file_[0-9a-f]{16}) \| (.*?) \| (.*?) \| ([\d,]+) bytes\]\n\n"
    r"Exploration Summary:\n",
)


@pytest.fixture(autouse=True)
def small_threshold(settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = THRESHOLD


def big_log(lines: int = 400, word: str = "request") -> str:
    return "".join(
        f"2026-01-01T00:00:{i % 60:02d} INFO {word} {i} served in 12ms\n" for i in range(lines)
    )


def big_json(rows: int = 300) -> str:
    return json.dumps([{"id": i, "name": f"user {i}", "tags": ["a", "b"]} for i in range(rows)])


def append(conversation, *payloads):
    return [
        r.message
        for r in messages_append(
            conversation_id=conversation.pk, messages=[parse_message(p) for p in payloads]
        )
    ]


def test_a_large_file_block_is_stored_and_replaced_by_a_reference(conversation):
    body = big_json()
    content = f'Please look at this:\n<file name="users.json" mime="application/json">{body}</file>\nThanks'
    [message] = append(conversation, {"role": "user", "content": content})
    message.refresh_from_db()
    [row] = LargeFile.objects.filter(conversation=conversation)
    assert message.file_ids == [row.id]
    assert re.fullmatch(r"file_[0-9a-f]{16}", row.id)
    assert message.content.startswith("Please look at this:\n[LCM File: ")
    assert message.content.endswith("\nThanks")
    assert body not in message.content
    match = REFERENCE.search(message.content)
    assert match.groups() == (row.id, "users.json", "application/json", f"{len(body):,}")
    assert row.exploration_summary in message.content
    assert message.token_count == estimate(message.content) < THRESHOLD
    # The row describes the bytes, and the storage holds exactly them.
    data = body.encode()
    assert (row.file_name, row.mime_type, row.byte_size) == (
        "users.json",
        "application/json",
        len(data),
    )
    assert row.sha256 == hashlib.sha256(data).hexdigest()
    assert row.line_count == 1
    assert row.token_count == estimate(body)
    assert row.storage_key == f"{conversation.pk}/{row.id}.json"
    with file_storage().open(row.storage_key, "rb") as handle:
        assert handle.read() == data
    # The context item counts the rewritten message.
    assert ContextItem.objects.get(message=message).token_count == message.token_count


def test_a_small_file_block_stays_inline(conversation):
    content = '<file name="a.txt">just a few words</file>'
    [message] = append(conversation, {"role": "user", "content": content})
    message.refresh_from_db()
    assert message.content == content
    assert message.file_ids == []
    assert LargeFile.objects.count() == 0


def test_a_block_exactly_at_the_threshold_is_intercepted(conversation):
    body = "x" * (THRESHOLD * 4)  # exactly THRESHOLD tokens
    below = "y" * (THRESHOLD * 4 - 4)
    assert estimate(body) == THRESHOLD and estimate(below) == THRESHOLD - 1
    [message] = append(
        conversation,
        {
            "role": "user",
            "content": f"<file name=a.txt>{body}</file><file name=b.txt>{below}</file>",
        },
    )
    message.refresh_from_db()
    assert LargeFile.objects.get().file_name == "a.txt"
    assert message.content.endswith(f"<file name=b.txt>{below}</file>")


def test_several_blocks_single_double_and_no_quotes(conversation):
    one, two = big_log(word="alpha"), big_log(word="beta")
    content = (
        f"<file name='one.log'>{one}</file> and <file name=two.log mime=text/plain>{two}</file>"
    )
    [message] = append(conversation, {"role": "user", "content": content})
    message.refresh_from_db()
    rows = {r.file_name: r for r in LargeFile.objects.all()}
    assert sorted(rows) == ["one.log", "two.log"]
    assert message.file_ids == [rows["one.log"].id, rows["two.log"].id]
    assert [m.group(1) for m in REFERENCE.finditer(message.content)] == message.file_ids


def test_an_unclosed_block_is_kept_as_text(conversation):
    content = f'<file name="cut.log">{big_log()}'
    [message] = append(conversation, {"role": "user", "content": content})
    message.refresh_from_db()
    assert message.content == content
    assert LargeFile.objects.count() == 0


def test_a_hostile_file_name_never_becomes_a_path(conversation):
    for name in ("../../etc/passwd", "/etc/shadow", "..\\..\\boot.ini"):
        append(
            conversation,
            {"role": "user", "content": f'<file name="{name}">{big_log(word=name)}</file>'},
        )
    rows = LargeFile.objects.order_by("created_at")
    assert [r.file_name for r in rows] == ["../../etc/passwd", "/etc/shadow", "..\\..\\boot.ini"]
    for row in rows:
        assert re.fullmatch(rf"{conversation.pk}/file_[0-9a-f]{{16}}\.txt", row.storage_key)
        path = file_storage().path(row.storage_key)
        assert path.startswith(str(file_storage().location) + "/")


def test_the_same_bytes_again_reuse_the_stored_file(conversation, other_user):
    body = big_log()
    first, second = append(
        conversation,
        {"role": "user", "content": f'<file name="a.log">{body}</file>'},
        {"role": "user", "content": f'<file name="again.log">{body}</file>'},
    )
    [third] = append(conversation, {"role": "user", "content": f'<file name="b.log">{body}</file>'})
    [row] = LargeFile.objects.all()
    for message in (first, second, third):
        message.refresh_from_db()
        assert message.file_ids == [row.id]
    assert "| again.log |" in second.content
    assert len(file_storage().listdir(str(conversation.pk))[1]) == 1
    # Another conversation stores its own copy.
    other = Conversation.objects.create(owner=other_user, session_id="o", token_budget=1000)
    [elsewhere] = append(other, {"role": "user", "content": f'<file name="a.log">{body}</file>'})
    elsewhere.refresh_from_db()
    assert elsewhere.file_ids != [row.id]
    assert LargeFile.objects.count() == 2


def test_a_large_tool_output_is_intercepted_with_the_tool_named(conversation):
    log = big_log()
    [message] = append(
        conversation,
        {
            "role": "tool",
            "content": log,
            "parts": [
                {"part_type": "tool", "tool_name": "bash", "tool_call_id": "c1", "tool_output": log}
            ],
        },
    )
    message.refresh_from_db()
    [row] = LargeFile.objects.all()
    assert row.tool_name == "bash"
    assert message.file_ids == [row.id]
    assert message.content.startswith(f"[LCM Tool Output: {row.id} | bash | text/plain | ")
    [part] = MessagePart.objects.filter(message=message)
    assert part.tool_output == message.content
    assert log not in part.tool_output
    assert message.token_count < THRESHOLD


def test_a_file_block_inside_a_text_part_is_rewritten_in_the_part(conversation):
    body = big_json()
    [message] = append(
        conversation,
        {
            "role": "user",
            "parts": [{"part_type": "text", "text_content": f"<file name=d.json>{body}</file>"}],
        },
    )
    message.refresh_from_db()
    [row] = LargeFile.objects.all()
    [part] = MessagePart.objects.filter(message=message)
    assert part.text_content.startswith(f"[LCM File: {row.id} | d.json | application/json")
    assert message.content == part.text_content
    assert message.file_ids == [row.id]


def test_a_failed_append_leaves_no_row_and_no_object(conversation):
    """All or nothing: the second message is refused by the database (a repeated external
    id inside one batch is caught earlier, so use a seq collision through a stale counter)."""
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=0)
    append(conversation, {"role": "user", "content": "first"})
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=0)  # the next seq collides
    with pytest.raises(Exception):  # noqa: B017 - the database's IntegrityError, per backend
        append(conversation, {"role": "user", "content": f"<file name=a.log>{big_log()}</file>"})
    assert LargeFile.objects.count() == 0
    assert Message.objects.filter(conversation=conversation).count() == 1
    folder = str(conversation.pk)
    assert not file_storage().exists(folder) or file_storage().listdir(folder) == ([], [])


def test_bad_input_is_refused_before_anything_is_stored(conversation):
    with pytest.raises(InvalidInput):
        parse_message({"role": "robot", "content": f"<file name=a.log>{big_log()}</file>"})
    assert LargeFile.objects.count() == 0


def test_no_file_means_no_extra_query(conversation, django_assert_num_queries):
    append(conversation, {"role": "user", "content": "warm up"})
    payload = parse_message({"role": "user", "content": "no files here " * 10})
    # No large-file lookup. SQLite: lock and advance the counters, insert the message
    # returning its key, its context item; PostgreSQL: one statement for all of it
    # (conversations/one_statement_append.py). Both: plus the test case's savepoint pair.
    with django_assert_num_queries(5 if connection.vendor == "sqlite" else 3):
        messages_append(conversation_id=conversation.pk, messages=[payload])


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_the_same_bytes_store_one_file(user, settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = THRESHOLD
    conversation = Conversation.objects.create(owner=user, session_id="race", token_budget=1000)
    body = big_log()

    def writer(k: int) -> None:
        for i in range(3):
            append(
                conversation,
                {"role": "user", "content": f"<file name=w{k}.log>{body}</file> {i}"},
            )

    run_together(*(partial(writer, k) for k in range(4)))
    [row] = LargeFile.objects.filter(conversation=conversation)
    messages = Message.objects.filter(conversation=conversation)
    assert messages.count() == 12
    assert {tuple(m.file_ids) for m in messages} == {(row.id,)}
    assert all(row.id in m.content for m in messages)
    assert file_storage().listdir(str(conversation.pk))[1] == [row.storage_key.split("/")[1]]


def test_a_large_file_part_is_stored_with_its_name_and_type(conversation):
    body = big_json()
    [message] = append(
        conversation,
        {
            "role": "user",
            "content": "here is the export",
            "parts": [
                {"part_type": "text", "text_content": "here is the export"},
                {
                    "part_type": "file",
                    "file_name": "export.json",
                    "file_mime": "application/json",
                    "text_content": body,
                },
            ],
        },
    )
    message.refresh_from_db()
    [row] = LargeFile.objects.all()
    assert (row.file_name, row.mime_type, row.byte_size) == (
        "export.json",
        "application/json",
        len(body),
    )
    file_part = MessagePart.objects.get(message=message, part_type="file")
    assert file_part.text_content.startswith(f"[LCM File: {row.id} | export.json | ")
    assert file_part.file_name == "export.json"
    assert message.file_ids == [row.id]
    assert message.content == "here is the export"


def test_a_part_text_repeated_in_the_content_is_replaced_there_too(conversation):
    log = big_log()
    [message] = append(
        conversation,
        {
            "role": "assistant",
            "content": f"I ran it:\n{log}",
            "parts": [{"part_type": "tool", "tool_name": "pytest", "tool_output": log}],
        },
    )
    message.refresh_from_db()
    [row] = LargeFile.objects.all()
    part = MessagePart.objects.get(message=message)
    assert message.content == f"I ran it:\n{part.tool_output}"
    assert part.tool_output.startswith(f"[LCM Tool Output: {row.id} | pytest | ")
    assert message.token_count < THRESHOLD
