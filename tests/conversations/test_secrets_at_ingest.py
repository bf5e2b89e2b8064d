"""Secrets at ingest (conversations/secret_guard.py): a corpus of known secret shapes is
masked on every path in (the messages API with parts and large files, the transcript and
lossless-claw importers, the turn engine; the drop-in wires in tests/dropin/test_secrets.py)
before anything is stored; `flag` stores verbatim and lists the findings for review; `off`
stores verbatim; users and conversations override the server; masking is deterministic."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from django.db import connection
from django.test import Client

from conversations.inputs import parse_message
from conversations.models import Conversation, Message, MessagePart, SecretFinding, Summary
from conversations.secret_guard import guard_content
from conversations.services import messages_append
from importers.services import import_file
from tests.conversations.secret_shapes import SHAPES, shape_text
from tests.factories import UserFactory
from tests.importers.conftest import LOSSLESS_CLAW
from tests.largefile_support import large_file_storage  # noqa: F401
from turns import services as turn_services
from turns.models import Branch, UserTurn

SECRETS = [secret for _, secret in SHAPES.values()]
CORPUS = "\n".join(shape_text(kind) for kind in sorted(SHAPES))
MASKED_CORPUS = "\n".join(SHAPES[k][0].format(f"[secret:{k}]") for k in sorted(SHAPES))


def _database_text() -> str:
    """Every value of every column of every table, as text."""
    chunks = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                chunks.extend(
                    bytes(v).decode("latin-1") if isinstance(v, bytes | memoryview) else str(v)
                    for v in row
                )
    return "\n".join(chunks)


def _leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text or json.dumps(s)[1:-1] in text]


def _post(api, conversation_id: int, body: dict):
    return api.post(f"/api/v1/conversations/{conversation_id}/messages/", body, format="json")


def _rich_message(text: str) -> dict:
    """The corpus in the content and in every kind of part column a secret reaches."""
    stripe, bearer = SHAPES["stripe_key"][1], SHAPES["bearer_token"][1]
    return {
        "role": "assistant",
        "content": text,
        "parts": [
            {"part_type": "text", "text_content": text},
            {
                "part_type": "tool",
                "tool_call_id": "call_1",
                "tool_name": "shell",
                "tool_input": {"env": {"STRIPE": stripe}, "argv": ["curl", f"Bearer {bearer}"]},
                "tool_output": text,
                "tool_error": shape_text("private_key"),
            },
            {"part_type": "file", "file_name": "x.txt", "file_url": shape_text("url_token")},
            {"part_type": "step_finish", "metadata": {"headers": {"auth": f"Bearer {bearer}"}}},
        ],
    }


def test_the_api_masks_every_shape_in_content_and_parts_before_anything_is_stored(
    api, conversation
):
    response = _post(api, conversation.pk, {"messages": [_rich_message(CORPUS)]})
    assert response.status_code == 201, response.content
    message = Message.objects.get(conversation=conversation)
    assert message.content == MASKED_CORPUS
    parts = list(MessagePart.objects.filter(message=message).order_by("ordinal"))
    assert parts[0].text_content == MASKED_CORPUS
    assert parts[1].tool_input == {
        "env": {"STRIPE": "[secret:stripe_key]"},
        "argv": ["curl", "Bearer [secret:bearer_token]"],
    }
    assert parts[1].tool_output == MASKED_CORPUS
    assert parts[2].file_url.endswith("access_token=[secret:url_token]&page=2")
    assert _leaked(_database_text()) == []
    findings = SecretFinding.objects.filter(message=message)
    assert {f.action for f in findings} == {"masked"}
    assert {f.kind for f in findings if f.location == "content"} == set(SHAPES)
    assert {f.location for f in findings} >= {
        "content",
        "parts[1].tool_input.env.STRIPE",
        "parts[1].tool_input.argv[1]",
        "parts[2].file_url",
        "parts[3].metadata.headers.auth",
    }
    # A finding names the place, never the secret.
    content = next(f for f in findings if f.location == "content" and f.kind == "stripe_key")
    assert CORPUS[content.start : content.end] == SHAPES["stripe_key"][1]


def test_a_large_tool_output_is_masked_before_its_bytes_are_stored(
    api,
    conversation,
    settings,
    large_file_storage,  # noqa: F811
):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 2000
    big = "\n".join(
        f"row {i}: {shape_text('anthropic_key') if i == 57 else i}" for i in range(3000)
    )
    body = {
        "role": "tool",
        "parts": [
            {"part_type": "tool", "tool_call_id": "c", "tool_name": "dump", "tool_output": big}
        ],
    }
    assert _post(api, conversation.pk, body).status_code == 201
    files = [p for p in Path(large_file_storage.location).rglob("*") if p.is_file()]
    assert len(files) == 1
    stored = files[0].read_bytes().decode()
    assert "row 57: export ANTHROPIC_API_KEY=[secret:anthropic_key]" in stored
    assert _leaked(stored) == [] and _leaked(_database_text()) == []


def test_masking_is_deterministic_across_conversations_and_re_sends(api, make_conversation):
    first, second = make_conversation(), make_conversation()
    body = {"role": "user", "content": CORPUS, "external_id": "m-1"}
    assert _post(api, first.pk, body).status_code == 201
    assert _post(api, second.pk, body).status_code == 201
    assert _post(api, first.pk, body).status_code == 200  # a re-send: the stored original
    stored = list(Message.objects.order_by("id").values_list("content", flat=True))
    assert stored == [MASKED_CORPUS, MASKED_CORPUS]
    assert SecretFinding.objects.filter(conversation=first).count() == len(SHAPES)


def test_flag_stores_verbatim_and_lists_the_findings_for_review(api, conversation, settings):
    settings.LCM_SECRET_POLICY = "flag"
    assert _post(api, conversation.pk, {"role": "user", "content": CORPUS}).status_code == 201
    assert Message.objects.get(conversation=conversation).content == CORPUS
    queue = api.get("/api/v1/secret-findings/?action=flagged&reviewed=false").json()["results"]
    assert sorted(f["kind"] for f in queue) == sorted(SHAPES)
    assert all(f["conversation"] == conversation.pk and f["message_seq"] == 1 for f in queue)
    assert not any(s in json.dumps(queue) for s in SECRETS)  # the list never shows a secret
    reviewed = api.post(f"/api/v1/secret-findings/{queue[0]['id']}/review/")
    assert reviewed.status_code == 200 and reviewed.json()["reviewed_at"]
    left = api.get("/api/v1/secret-findings/?action=flagged&reviewed=false").json()["results"]
    assert len(left) == len(SHAPES) - 1
    assert api.get("/api/v1/secret-findings/?reviewed=maybe").status_code == 400


def test_off_stores_verbatim_and_records_nothing(api, conversation, settings):
    settings.LCM_SECRET_POLICY = "off"
    assert _post(api, conversation.pk, {"role": "user", "content": CORPUS}).status_code == 201
    assert Message.objects.get(conversation=conversation).content == CORPUS
    assert not SecretFinding.objects.exists()


def test_users_and_conversations_override_the_server(api, other_api, user, make_conversation):
    quiet, noisy = make_conversation(), make_conversation()
    assert api.put("/api/v1/secret-policy/", {"policy": "flag"}, format="json").json() == {
        "policy": "flag",
        "server": "mask",
        "effective": "flag",
    }
    answer = api.put(
        f"/api/v1/conversations/{quiet.pk}/secret-policy/", {"policy": "off"}, format="json"
    )
    assert answer.json() == {"policy": "off", "owner": "flag", "server": "mask", "effective": "off"}
    assert api.put("/api/v1/secret-policy/", {"policy": "loud"}, format="json").status_code == 400
    assert (
        other_api.get(f"/api/v1/conversations/{quiet.pk}/secret-policy/").status_code == 404
    )  # another user's conversation does not exist for them
    elsewhere = Conversation.objects.create(
        owner=UserFactory(username="third"), session_id="s", token_budget=1000
    )
    for target in (quiet, noisy):
        assert _post(api, target.pk, {"role": "user", "content": CORPUS}).status_code == 201
    messages_append(
        conversation_id=elsewhere.pk, messages=[parse_message({"role": "user", "content": CORPUS})]
    )
    stored = dict(Message.objects.values_list("conversation_id", "content"))
    assert stored == {quiet.pk: CORPUS, noisy.pk: CORPUS, elsewhere.pk: MASKED_CORPUS}
    actions = dict(SecretFinding.objects.values_list("conversation_id", "action").distinct())
    assert actions == {noisy.pk: "flagged", elsewhere.pk: "masked"}
    assert (
        api.put("/api/v1/secret-policy/", {"policy": None}, format="json").json()["effective"]
        == "mask"
    )


def test_the_transcript_importer_masks_before_storing(user, tmp_path):
    lines = [
        {"role": "user", "content": CORPUS},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "sh",
                    "input": {"cmd": shape_text("aws_secret_access_key")},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": CORPUS}],
        },
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    import_file(format="jsonl", path=path, owner=user)
    assert Message.objects.filter(content=MASKED_CORPUS).count() == 1
    assert _leaked(_database_text()) == []
    assert SecretFinding.objects.filter(action="masked").count() >= 2 * len(SHAPES) + 1


def test_the_lossless_claw_importer_masks_messages_and_summaries(user, tmp_path):
    source = tmp_path / "lcm.db"
    shutil.copy(LOSSLESS_CLAW / "lcm.db", source)
    db = sqlite3.connect(source)
    with db:
        first = db.execute("SELECT min(message_id) FROM messages WHERE content != ''").fetchone()[0]
        db.execute(
            "UPDATE messages SET content = content || ? WHERE message_id = ?",
            ("\n" + CORPUS, first),
        )
        db.execute(
            "UPDATE summaries SET content = content || ?", ("\n" + shape_text("stripe_key"),)
        )
    db.close()
    import_file(format="lossless-claw", path=source, owner=user)
    masked = Message.objects.get(external_id=f"lossless-claw:{first}")
    assert masked.content.endswith("\n" + MASKED_CORPUS)
    assert all(
        s.content.endswith("stripe.api_key = '[secret:stripe_key]'") for s in Summary.objects.all()
    )
    assert Summary.objects.exists()
    assert _leaked(_database_text()) == []
    assert SecretFinding.objects.filter(message=masked).count() == len(SHAPES)


def test_a_turn_masks_its_user_message_before_the_turn_and_its_mirror_store_it(
    chat, offline_engine
):
    branch = Branch.objects.get(session=chat)
    turn = turn_services.turn_accept(session=chat, branch=branch, content=CORPUS)
    stored = UserTurn.objects.get(pk=turn.pk).user_message
    assert stored["rendered_text"] == MASKED_CORPUS
    assert Message.objects.get(conversation_id=branch.conversation_id).content == MASKED_CORPUS
    assert _leaked(_database_text()) == []


def test_the_admin_lists_findings_for_review_and_marks_them_reviewed(api, conversation, settings):
    settings.LCM_SECRET_POLICY = "flag"
    assert _post(api, conversation.pk, {"role": "user", "content": CORPUS}).status_code == 201
    browser = Client()
    browser.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    page = browser.get("/admin/conversations/secretfinding/", {"action__exact": "flagged"})
    assert page.status_code == 200
    assert not any(secret in page.content.decode() for secret in SECRETS)
    pks = list(SecretFinding.objects.values_list("pk", flat=True)[:3])
    browser.post(
        "/admin/conversations/secretfinding/",
        {"action": "mark_reviewed", "_selected_action": pks},
    )
    assert SecretFinding.objects.filter(reviewed_at__isnull=False).count() == 3
    assert browser.get(f"/admin/conversations/secretfinding/{pks[0]}/delete/").status_code == 403


def test_turn_content_blocks_are_masked_by_the_conversations_policy(conversation):
    """The walk the turn engine uses on a turn's content and on the tool results it keeps."""
    blocks = [
        {"type": "text", "text": shape_text("openai_key")},
        {"type": "tool_use", "id": "t1", "name": "sh", "input": {"cmd": shape_text("slack_token")}},
        {
            "type": "tool_result",
            "tool_use_id": "t1",
            "content": [{"type": "text", "text": shape_text("google_api_key")}],
        },
        {"type": "image", "source": {"type": "base64", "data": SHAPES["high_entropy_string"][1]}},
    ]
    masked = guard_content(conversation_id=conversation.pk, content=blocks)
    assert masked[0]["text"] == SHAPES["openai_key"][0].format("[secret:openai_key]")
    assert masked[1]["input"] == {"cmd": "SLACK=[secret:slack_token]"}
    assert masked[2]["content"][0]["text"] == "maps?key=[secret:google_api_key]"
    assert masked[3] == blocks[3]  # images are not text
    assert blocks[0]["text"] == shape_text("openai_key")  # the caller's blocks are not changed
    Conversation.objects.filter(pk=conversation.pk).update(secret_policy="flag")
    assert guard_content(conversation_id=conversation.pk, content=blocks) == blocks
