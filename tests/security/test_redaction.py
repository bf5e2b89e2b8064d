"""Redaction (docs/security.md, "Redaction"): a secret planted in a message's text, a tool
output and a large file of a compacted (depth >= 2), memory-indexed, partly archived
conversation with a turn session's journals and event logs is removed from every place;
verify finds it nowhere; summaries are regenerated and still expand; integrity reports
nothing; places it did not touch stay byte-identical; other users' data is untouched; a
job interrupted after any step resumes to the end."""

from __future__ import annotations

import hashlib
import io
import zipfile

import pytest
from django.core.files.storage import storages
from django.db import DatabaseError, transaction

from archive.models import Segment
from archive.selectors import forget
from archive.services import segment_archive
from compaction.engine import compact_conversation
from compaction.summarizers import DeterministicSummarizer
from conversations.inputs import parse_message
from conversations.models import Message, MessagePart, Summary, SummaryMessage
from conversations.services import messages_append
from integrity.checks import Scope
from integrity.report import scan
from largefiles.models import LargeFile
from largefiles.store import file_storage
from memory.indexing import index_conversation_messages, index_turn
from memory.models import Chunk
from security.models import AuditEvent, Redaction
from security.redaction import jobs, queue
from security.redaction.request import parse, scope_of_conversation
from security.redaction.verify import verify
from tests.factories import ConversationFactory, append_messages
from tests.largefile_support import large_file_storage  # noqa: F401
from tests.security.exporting import export_download
from tests.turns.conftest import send
from turns import services as turn_services
from turns.events import events_path
from turns.journal import journal_path
from turns.models import ProviderStep

pytestmark = pytest.mark.usefixtures("large_file_storage", "offline_engine", "archive_folder")

SECRET = "sk_test_51HqZt9QuokkaZanzibar0042"
FILE_BODY = "".join(f"row {i}: ledger entry {'x' * 40}\n" for i in range(300))


@pytest.fixture
def archive_folder(tmp_path, settings):
    settings.STORAGES = {
        **settings.STORAGES,
        "archive_segments": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(tmp_path / "archive")},
        },
    }
    storages._storages.pop("archive_segments", None)
    forget()
    yield
    storages._storages.pop("archive_segments", None)
    forget()


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000
    settings.LCM_LEAF_CHUNK_TOKENS = 200
    settings.LCM_CONDENSED_MIN_FANOUT = 2
    settings.LCM_LEAF_MIN_FANOUT = 2
    settings.LCM_LEAF_TARGET_TOKENS = 60
    settings.LCM_CONDENSED_TARGET_TOKENS = 60
    settings.LCM_FRESH_TAIL_COUNT = 4
    # The secret these tests redact was stored as sent: the ingest scanner's policy is off
    # (its default, mask, would have kept it out at the door: tests/conversations).
    settings.LCM_SECRET_POLICY = "off"


def _planted(owner, secret: str = SECRET):
    """A conversation with the secret in message text (seq 4), a tool output (seq 6) and a
    large file (seq 7), compacted to depth >= 2, indexed, its oldest messages archived."""
    conversation = ConversationFactory(owner=owner)
    append_messages(conversation, 3)
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message({"role": "user", "content": f"my key is {secret} please use it"}),
            parse_message({"role": "assistant", "content": "calling the payments API now"}),
            parse_message(
                {
                    "role": "tool",
                    "content": "charge created",
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
        ],
    )
    append_messages(conversation, 30, start=10)
    compact_conversation(
        conversation_id=conversation.pk, mode="full", summarizer=DeterministicSummarizer()
    )
    index_conversation_messages(conversation_id=conversation.pk)
    segment_archive(conversation=conversation, seq_from=1, seq_to=5)
    return conversation


@pytest.fixture
def chat(user):
    """A turn session with the secret in a turn, its journal and its event log."""
    session = turn_services.session_create(owner=user, title="chat")
    turn = send(session, f"remember the staging key {SECRET} for later", commit=True)
    index_turn(turn_id=turn.pk)
    events_path(turn.pk).write_text(f'{{"id":1,"event":"delta","data":{{"text":"{SECRET}"}}}}\n')
    return session, turn


def _places(conversation) -> dict:
    """Fingerprints of the conversation's stored places (for byte-identity checks)."""
    messages = list(
        Message.objects.filter(conversation=conversation).order_by("seq").values_list("content")
    )
    parts = list(
        MessagePart.objects.filter(message__conversation=conversation)
        .order_by("pk")
        .values_list("tool_output", "text_content")
    )
    summaries = list(
        Summary.objects.filter(conversation=conversation)
        .order_by("pk")
        .values_list("pk", "content")
    )
    files = [
        hashlib.sha256(file_storage().open(f.storage_key, "rb").read()).hexdigest()
        for f in LargeFile.objects.filter(conversation=conversation).order_by("pk")
    ]
    return {"messages": messages, "parts": parts, "summaries": summaries, "files": files}


def _depth(conversation) -> int:
    return max(Summary.objects.filter(conversation=conversation).values_list("depth", flat=True))


def _redact(api, url, body, capture):
    """Ask (202: the job, queued), let the worker run it (here: at the commit), and read the
    job again at its URL."""
    with capture(execute=True):
        response = api.post(url, body, format="json")
    assert response.status_code == 202, response.content
    assert response["Location"] == response.json()["url"]
    job = api.get(response.json()["url"])
    assert job.status_code == 200, job.content
    return job.json()


def _confirmed(api, url, body, capture):
    """A selector that may match everywhere: dry run first, then the job naming it."""
    refused = api.post(url, body, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "dry_run_required"
    dry = _redact(api, url, {**body, "dry_run": True}, capture)
    assert dry["state"] == "done" and dry["dry_run"] and dry["plan"], dry
    return _redact(api, url, {**body, "confirm_dry_run": dry["id"]}, capture)


def test_a_literal_is_redacted_everywhere_and_verify_finds_nothing(
    api, user, django_capture_on_commit_callbacks
):
    conversation = _planted(user)
    untouched = _planted(user, secret="nothing-secret-here")
    untouched_before = _places(untouched)
    assert _depth(conversation) >= 2
    assert Segment.objects.filter(conversation=conversation).exists()
    assert verify([SECRET]).count > 0
    before = _places(conversation)
    summary_ids = {pk for pk, _ in before["summaries"]}

    url = f"/api/v1/conversations/{conversation.pk}/redactions/"
    plan = _redact(
        api, url, {"literal": SECRET, "reason": "api-key", "dry_run": True},
        django_capture_on_commit_callbacks,
    )  # fmt: skip
    places = plan["plan"]
    assert places["canonical"]["messages"] >= 1 and places["canonical"]["archived_messages"] >= 1
    assert places["large_files"]["files"] == 1 and places["archive_segments"] == 1
    assert places["summaries"]["total"] >= 2 and places["memory_units"] >= 1
    assert verify([SECRET]).count > 0  # a dry run writes nothing but its job
    assert (plan["state"], plan["progress"]["steps_total"], plan["steps"]) == ("done", 0, {})

    body = _redact(
        api, url, {"literal": SECRET, "reason": "api-key"}, django_capture_on_commit_callbacks
    )
    assert body["state"] == "done", body
    assert body["verification"]["occurrences"] == 0, body["verification"]
    assert verify([SECRET]).count == 0
    marker = body["marker"]
    assert marker.startswith("[redacted: api-key red_")

    # Summaries keep their ids and still expand, to the redacted text.
    after = _places(conversation)
    assert {pk for pk, _ in after["summaries"]} == summary_ids
    regenerated = set(body["steps"]["summaries"]["ids"])
    assert len(regenerated) >= 2 and body["steps"]["summaries"].get("depth_1", 0) >= 1
    leaf = SummaryMessage.objects.filter(message__conversation=conversation, message__seq=4).get()
    for summary_id in (
        leaf.summary_id,
        Summary.objects.filter(conversation=conversation).order_by("-depth").first().pk,
    ):
        expanded = api.post(
            "/api/v1/expand/",
            {"summary_id": summary_id, "include_messages": True, "depth": 3, "token_cap": 100000},
            format="json",
        )
        assert expanded.status_code == 200, expanded.content
        assert SECRET not in expanded.content.decode() and marker in expanded.content.decode()
    # Places it did not touch are byte-identical.
    assert [s for s in after["summaries"] if s[0] not in regenerated] == [
        s for s in before["summaries"] if s[0] not in regenerated
    ]
    # seq 4 is archived (its segment was rewritten), seq 6's tool output is a part, seq 7
    # holds a reference to the large file (whose bytes were rewritten).
    assert after["messages"] == before["messages"]
    assert sum(a != b for a, b in zip(before["parts"], after["parts"], strict=True)) == 1
    assert after["files"] != before["files"]
    assert _places(untouched) == untouched_before
    assert scan(Scope(None)).total_problems == 0
    # An export taken now holds the marker, not the secret, in every entry.
    exported = export_download(
        api, {"conversation_id": conversation.pk}, django_capture_on_commit_callbacks
    )
    with zipfile.ZipFile(io.BytesIO(b"".join(exported.streaming_content))) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    assert not [name for name, data in entries.items() if SECRET.encode() in data]
    assert any(marker.encode() in data for data in entries.values())
    event = AuditEvent.objects.get(action="redaction")  # the job, not its dry run
    assert SECRET not in str(event.details) and event.details["verification"]["occurrences"] == 0
    assert {r.sealed for r in Redaction.objects.all()} == {""}


def test_a_pattern_across_a_users_data_leaves_another_user_untouched(
    api, user, other_user, chat, django_capture_on_commit_callbacks
):
    mine = [_planted(user), _planted(user, secret="sk_test_51SecondConversationKey77")]
    # 50 of the user's conversations in all: the chat's, the two above and 47 short ones.
    short_keys = [f"sk_test_51ShortConversation{n:02d}Key" for n in range(47)]
    for key in short_keys:
        messages_append(
            conversation_id=ConversationFactory(owner=user).pk,
            messages=[parse_message({"role": "user", "content": f"deploy with {key} today"})],
        )
    theirs = _planted(other_user, secret="sk_test_51SomeoneElsesKeyQQ123")
    theirs_before = _places(theirs)
    session, turn = chat
    step = ProviderStep.objects.filter(turn=turn).first()
    assert SECRET in str(step.request_json)

    body = _confirmed(
        api, "/api/v1/redactions/", {"regex": r"sk_test_[0-9A-Za-z]{20,}"},
        django_capture_on_commit_callbacks,
    )  # fmt: skip
    assert body["state"] == "done" and body["verification"]["occurrences"] == 0, body
    assert verify([SECRET, "sk_test_51SecondConversationKey77", *short_keys]).count == 0
    assert _places(theirs) == theirs_before
    assert verify(["sk_test_51SomeoneElsesKeyQQ123"]).count > 0
    step.refresh_from_db()
    assert SECRET not in str(step.request_json) and SECRET not in str(step.response_json)
    assert SECRET not in events_path(turn.pk).read_text()
    assert not journal_path(step.pk).exists() or SECRET not in journal_path(step.pk).read_text()
    assert scan(Scope(None)).total_problems == 0
    for conversation in mine:
        assert not Chunk.objects.filter(
            conversation=conversation, rendered_text__contains="sk_test"
        )


def test_a_job_interrupted_after_each_step_resumes_to_the_end(user, monkeypatch):
    """An error at each step in turn (the job fails there, its earlier steps recorded);
    integrity stays clean at every stop; resuming finishes it and verify finds nothing."""
    conversation = _planted(user)
    failing = {"at": None}
    steps = []
    for name, step in jobs.STEPS:

        def wrapped(ctx, name=name, step=step):
            if failing["at"] == name:
                raise RuntimeError("interrupted")
            return step(ctx)

        steps.append((name, wrapped))
    monkeypatch.setattr(jobs, "STEPS", tuple(steps))
    request = parse({"literal": SECRET}, scope_of_conversation(conversation))
    for index, name in enumerate(jobs.STEP_NAMES):
        failing["at"] = name
        with pytest.raises(RuntimeError, match="interrupted"):
            if index == 0:
                jobs.start(request, via="command")
            else:
                jobs.resume(Redaction.objects.get().pk)
        row = Redaction.objects.get()
        assert row.state == "failed" and row.error == f"step {name}: RuntimeError"
        assert set(row.steps) == set(jobs.STEP_NAMES[:index])  # (jsonb sorts keys)
        assert scan(Scope(None)).total_problems == 0, name
    failing["at"] = None
    row = jobs.resume(Redaction.objects.get().pk)
    assert row.state == "done" and row.verification["occurrences"] == 0
    assert verify([SECRET]).count == 0
    assert AuditEvent.objects.filter(action="redaction").count() == 1


def test_whole_messages_and_a_span(api, user, django_capture_on_commit_callbacks):
    conversation = _planted(user)
    live = Message.objects.filter(conversation=conversation, archived_in=None).order_by("seq")
    whole, spanned = live[0], live[1]
    url = f"/api/v1/conversations/{conversation.pk}/redactions/"
    body = _redact(api, url, {"message_ids": [whole.pk]}, django_capture_on_commit_callbacks)
    whole.refresh_from_db()
    assert whole.content == body["marker"] and body["state"] == "done"
    assert all(
        value in (None, "", body["marker"], {"redacted": body["marker"]})
        for part in MessagePart.objects.filter(message=whole).values()
        for key, value in part.items()
        if key in ("text_content", "tool_output", "tool_input")
    )
    text = spanned.content
    body = _redact(
        api, url, {"span": {"message_id": spanned.pk, "start": 0, "end": 7}},
        django_capture_on_commit_callbacks,
    )  # fmt: skip
    spanned.refresh_from_db()
    assert spanned.content == body["marker"] + text[7:]
    assert scan(Scope(None)).total_problems == 0


def test_bad_requests_get_one_error_shape_and_write_nothing(api, other_api, staff_api, user):
    conversation = _planted(user)
    url = f"/api/v1/conversations/{conversation.pk}/redactions/"
    message = Message.objects.filter(conversation=conversation).first()
    cases = [
        ({}, 400),
        ({"literal": "abc"}, 400),  # too short
        ({"literal": SECRET, "regex": "x+"}, 400),  # two selectors
        ({"regex": "("}, 400),
        ({"regex": "x*"}, 400),  # matches the empty string
        ({"regex": "redacted"}, 400),  # matches the marker
        ({"literal": SECRET, "reason": "Bad Reason!"}, 400),
        ({"message_ids": [999999]}, 404),  # not in the scope
        ({"span": {"message_id": 999999, "start": 0, "end": 1}}, 404),
        ({"message_ids": ["1"]}, 400),
        ({"span": {"message_id": message.pk, "start": 5, "end": 2}}, 400),
        ({"span": {"message_id": message.pk, "start": 0, "end": 10**6}}, 400),
        ({"literal": SECRET, "surprise": 1}, 400),
        ({"literal": SECRET, "confirm_dry_run": ""}, 400),
        ({"literal": "0000"}, 409),  # may match everywhere: dry_run_required
        ({"regex": r"sk_\w+"}, 409),
        ({"literal": "0000", "confirm_dry_run": "red_0000000000000000"}, 409),  # no such
    ]
    for body, status in cases:
        response = api.post(url, body, format="json")
        assert response.status_code == status, (body, response.content)
        assert set(response.json()) == {"code", "message", "extra"}, body
    assert other_api.post(url, {"literal": SECRET}, format="json").status_code == 404
    for user_id in ({}, "me", 0):  # staff naming another user's data: an id, checked first
        response = staff_api.post(
            "/api/v1/redactions/", {"literal": SECRET, "user_id": user_id}, format="json"
        )
        assert response.status_code == 400, (user_id, response.content)
    assert Redaction.objects.count() == 0 and verify([SECRET]).count > 0


def test_a_catastrophic_regex_fails_its_dry_run_job_and_writes_nothing(
    api, user, django_capture_on_commit_callbacks
):
    conversation = _planted(user)
    url = f"/api/v1/conversations/{conversation.pk}/redactions/"
    job = _redact(
        api, url, {"regex": r"(x|xx)+y", "dry_run": True}, django_capture_on_commit_callbacks
    )
    assert job["state"] == "failed" and "simplify it" in job["error"], job
    assert verify([SECRET]).count > 0


def test_canonical_rows_refuse_updates_outside_the_permit(user):
    from security.redaction.permit import redact_permit

    conversation = _planted(user, secret="nothing-secret-here")
    message = Message.objects.filter(conversation=conversation, archived_in=None).first()
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        Message.objects.filter(pk=message.pk).update(content="rewritten")
    with transaction.atomic(), redact_permit():
        Message.objects.filter(pk=message.pk).update(content="rewritten")
    with pytest.raises(DatabaseError, match="immutable"), transaction.atomic():
        Message.objects.filter(pk=message.pk).update(content="again")  # the permit ended


def test_the_command_redacts_from_stdin_verifies_and_shows(user, monkeypatch, capsys):
    import io
    import json

    from django.core.management import call_command

    conversation = _planted(user)
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    call_command(
        "lcm_redact", "redact", "--conversation", str(conversation.pk), "--stdin", "--dry-run"
    )
    dry = json.loads(capsys.readouterr().out)
    assert (dry["state"], dry["dry_run"], dry["plan"]["large_files"]["files"]) == ("done", True, 1)
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    call_command("lcm_redact", "redact", "--conversation", str(conversation.pk), "--stdin")
    report = json.loads(capsys.readouterr().out)
    assert report["state"] == "done" and report["verification"]["occurrences"] == 0
    monkeypatch.setattr("sys.stdin", io.StringIO(SECRET + "\n"))
    call_command("lcm_redact", "verify")
    assert json.loads(capsys.readouterr().out)["occurrences"] == 0
    call_command("lcm_redact", "show", report["id"])
    assert json.loads(capsys.readouterr().out)["id"] == report["id"]


def test_the_admin_action_redacts_whole_messages_and_lists_the_job(user):
    from django.test import Client

    from tests.factories import UserFactory

    staff_user = UserFactory(username="admin", is_staff=True, is_superuser=True)
    conversation = _planted(user)
    message = Message.objects.filter(conversation=conversation, archived_in=None).first()
    client = Client()
    client.force_login(staff_user)
    response = client.post(
        "/admin/conversations/message/",
        {"action": "redact_messages", "_selected_action": [message.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert "queued" in response.content.decode()
    row = Redaction.objects.get()
    assert (row.state, row.via, row.actor_id) == ("pending", "admin", staff_user.pk)
    queue.run_queued(row.pk)  # the worker's part
    row.refresh_from_db()
    assert row.state == "done"
    message.refresh_from_db()
    assert message.content == f"[redacted: admin {row.pk}]"
    listing = client.get("/admin/security/redaction/")
    assert listing.status_code == 200 and row.pk in listing.content.decode()


def test_a_storage_nothing_was_written_to_yet_verifies_as_empty(
    api, user, settings, tmp_path, django_capture_on_commit_callbacks
):
    # A fresh server: the encrypted large-file storage's folder does not exist yet.
    settings.STORAGES = {
        **settings.STORAGES,
        "large_files": {
            "BACKEND": "security.storage.EncryptedStorage",
            "OPTIONS": {
                "backend": "django.core.files.storage.FileSystemStorage",
                "options": {"location": str(tmp_path / "never-written")},
            },
        },
    }
    storages._storages.pop("large_files", None)
    conversation = ConversationFactory(owner=user)
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": f"the key is {SECRET}"})],
    )
    body = _redact(
        api, f"/api/v1/conversations/{conversation.pk}/redactions/", {"literal": SECRET},
        django_capture_on_commit_callbacks,
    )  # fmt: skip
    storages._storages.pop("large_files", None)
    assert body["verification"]["occurrences"] == 0


def test_a_rewrite_that_would_collide_with_a_unique_value_keeps_the_row_and_says_so(
    api, user, django_capture_on_commit_callbacks
):
    # Both session ids outgrow their 255 characters once rewritten, and both are cut to the
    # same run of short markers: the second rewrite would break (owner, session_id)'s
    # uniqueness. That row keeps its text; verify finds it; the job ends failed with the
    # place listed (never done while verify finds anything), no 500.
    for repeat in (40, 41):
        conversation = ConversationFactory(owner=user, session_id="000000" * repeat)
        messages_append(
            conversation_id=conversation.pk,
            messages=[parse_message({"role": "user", "content": "pin 000000 for the door"})],
        )
    body = _confirmed(
        api, "/api/v1/redactions/", {"literal": "000000"}, django_capture_on_commit_callbacks
    )
    assert body["state"] == "failed"
    assert (
        body["steps"]["rows"]["conversations.Conversation (kept: a unique value would collide)"]
        == 1
    )
    assert body["verification"]["occurrences"] > 0
    assert "conversations_conversation (" in body["error"]
    assert not Message.objects.filter(content__contains="000000").exists()
