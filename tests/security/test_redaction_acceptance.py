"""Issue 32's acceptance run for redaction (only with `--slow`; figures in
docs/benchmarks.md, "Redaction"): a 2,000-message conversation compacted to depth 3,
memory-indexed, with large files, its oldest part archived, exported once, beside a turn
session with a stream journal and a turn event log; a secret planted in message 57's text,
message 58's tool output and message 59's large file is redacted from all of the user's
data. Verify finds it nowhere, every summary over it was regenerated and still expands,
integrity reports nothing, and everything the redaction did not touch is byte-identical."""

from __future__ import annotations

import hashlib
import time
from datetime import datetime

import pytest

from archive.services import segment_archive
from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from conversations.inputs import parse_message
from conversations.models import Message, MessagePart, Summary
from conversations.services import messages_append
from integrity.checks import Scope
from integrity.report import scan
from largefiles.models import LargeFile
from largefiles.store import file_storage
from memory.indexing import index_conversation_messages, index_turn
from memory.models import Chunk
from security.models import AuditEvent
from security.redaction.verify import verify
from tests.factories import ConversationFactory, append_messages
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.security.test_redaction import FILE_BODY, SECRET, archive_folder  # noqa: F401
from tests.support import suite
from tests.turns.conftest import send
from turns import services as turn_services
from turns.events import events_path

pytestmark = [
    pytest.mark.skipif(not suite.slow(), reason="the 2,000-message acceptance run: --slow"),
    pytest.mark.usefixtures("large_file_storage", "offline_engine", "archive_folder"),
    # Committed, as in production: verify then folds SQLite's WAL into the database file
    # (inside a test's transaction the spilled pages of the setup would stay in the WAL).
    pytest.mark.django_db(transaction=True),
]


def _secret_messages(secret: str) -> list:
    return [
        parse_message({"role": "user", "content": f"message 57: my key is {secret} use it"}),
        parse_message(
            {
                "role": "tool",
                "content": "message 58: charge created",
                "parts": [
                    {
                        "part_type": "tool",
                        "tool_name": "bash",
                        "tool_call_id": "call_pay",
                        "tool_output": f"curl -u {secret}: https://api.example/charges ok",
                        "tool_status": "completed",
                    }
                ],
            }
        ),
        parse_message(
            {
                "role": "user",
                "content": f'<file name="env.txt" mime="text/plain">{FILE_BODY}'
                f"PAYMENTS_KEY={secret}\n{FILE_BODY}</file>",
            }
        ),
    ]


def _conversation(owner, secret: str):
    conversation = ConversationFactory(owner=owner)
    append_messages(conversation, 56)
    messages_append(conversation_id=conversation.pk, messages=_secret_messages(secret))
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message(
                {
                    "role": "user",
                    "content": f'<file name="b.txt" mime="text/plain">{FILE_BODY}</file>',
                }
            )
        ],
    )
    append_messages(conversation, 2000 - 60, start=60)
    started = time.perf_counter()
    compact_conversation(
        conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
    )
    conversation.compaction_seconds = time.perf_counter() - started  # the baseline
    index_conversation_messages(conversation_id=conversation.pk)
    segment_archive(conversation=conversation, seq_from=1, seq_to=300)
    return conversation


def _fingerprint(conversation) -> dict:
    return {
        "messages": dict(
            Message.objects.filter(conversation=conversation).values_list("seq", "content")
        ),
        "parts": dict(
            MessagePart.objects.filter(message__conversation=conversation).values_list(
                "pk", "tool_output"
            )
        ),
        "summaries": dict(
            Summary.objects.filter(conversation=conversation).values_list("pk", "content")
        ),
        "chunks": dict(
            Chunk.objects.filter(conversation=conversation).values_list("pk", "rendered_text")
        ),
        "files": {
            f.pk: hashlib.sha256(file_storage().open(f.storage_key, "rb").read()).hexdigest()
            for f in LargeFile.objects.filter(conversation=conversation)
        },
    }


def test_the_acceptance_run(api, user, settings, capsys):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000
    settings.LCM_LEAF_CHUNK_TOKENS = 1000
    settings.LCM_CONDENSED_MIN_FANOUT = 2
    conversation = _conversation(user, SECRET)
    assert Summary.objects.filter(conversation=conversation, depth__gte=3).exists()
    chat = turn_services.session_create(owner=user, title="chat")
    turn = send(chat, f"remember the staging key {SECRET} for later", commit=True)
    index_turn(turn_id=turn.pk)
    events_path(turn.pk).write_text(f'{{"id":1,"event":"delta","data":{{"text":"{SECRET}"}}}}\n')
    exported = api.post("/api/v1/exports/", {"conversation_id": conversation.pk}, format="json")
    b"".join(exported.streaming_content)
    before = _fingerprint(conversation)
    assert verify([SECRET]).count > 0

    started = time.perf_counter()
    response = api.post("/api/v1/redactions/", {"literal": SECRET}, format="json")
    elapsed = time.perf_counter() - started
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "done" and body["verification"]["occurrences"] == 0, body[
        "verification"
    ]
    assert verify([SECRET]).count == 0
    assert len(body["exports_on_record"]) == 1
    regenerated = set(body["steps"]["summaries"]["ids"])
    assert {f"depth_{d}" for d in range(4)} <= set(body["steps"]["summaries"])
    for summary_id in regenerated:
        expanded = api.post(
            "/api/v1/expand/",
            {"summary_id": summary_id, "include_messages": True, "token_cap": 200000},
            format="json",
        )
        assert expanded.status_code == 200 and SECRET not in expanded.content.decode()
    assert scan(Scope(None)).total_problems == 0
    after = _fingerprint(conversation)
    assert {s for s, c in before["messages"].items() if after["messages"][s] != c} <= {57, 58, 59}
    assert {k: v for k, v in after["summaries"].items() if k not in regenerated} == {
        k: v for k, v in before["summaries"].items() if k not in regenerated
    }
    assert after["parts"] == before["parts"]  # 58's part is archived: its segment was rewritten
    assert sum(before["files"][k] != after["files"][k] for k in before["files"]) == 1
    kept_chunks = set(before["chunks"]) & set(after["chunks"])
    assert all(before["chunks"][k] == after["chunks"][k] for k in kept_chunks)
    assert AuditEvent.objects.filter(action="redaction").count() == 1

    times = [datetime.fromisoformat(step["at"]) for step in body["steps"].values()]
    with capsys.disabled():
        print(
            f"\nredaction acceptance: {elapsed:.2f} s total, the full compaction of the same "
            f"conversation (baseline) {conversation.compaction_seconds:.2f} s; steps "
            + ", ".join(
                f"{name} {n}" for name, n in body["steps"].items() if name not in ("caches",)
            )[:2000]
            + f"; first→last step {(max(times) - min(times)).total_seconds():.2f} s; "
            f"chunks re-derived {len(set(before['chunks']) - kept_chunks)} of "
            f"{len(before['chunks'])}; summaries regenerated {len(regenerated)} of "
            f"{len(before['summaries'])}"
        )
