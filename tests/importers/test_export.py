"""Exports: JSONL round trips to identical messages and parts (in this database for another
user, and in a fresh database); the Anthropic and OpenAI exports import back to the same
export; the export API is owner-scoped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conversations.models import Conversation, Message, MessagePart
from importers import exporters
from importers.services import import_file
from tests.factories import UserFactory
from tests.importers.conftest import FIXTURES

MAIN = Path(__file__).resolve().parents[2]
_PART_FIELDS = [
    f.name for f in MessagePart._meta.concrete_fields if f.name not in ("id", "message")
]


def _rows(conversation) -> list[tuple]:
    """Every stored value of the messages and parts, ids aside."""
    rows = []
    for message in Message.objects.filter(conversation=conversation).order_by("seq"):
        parts = [
            tuple(getattr(p, f) for f in _PART_FIELDS if f != "session_id")
            for p in MessagePart.objects.filter(message=message).order_by("ordinal")
        ]
        rows.append(
            (
                message.seq,
                message.role,
                message.content,
                message.token_count,
                message.created_at,
                message.file_ids,
                parts,
            )
        )
    return rows


@pytest.fixture
def sources(user, lc_fixture):
    import_file(format="claude-code", path=FIXTURES / "claude_code_session.jsonl", owner=user)
    import_file(format="lossless-claw", path=lc_fixture / "lcm.db", owner=user)
    return [
        Conversation.objects.get(owner=user, session_id="7b3e9c1a-4f2d-4e8b-9a61-2c5d8e0f1a37"),
        Conversation.objects.get(owner=user, session_id="fixture-session-b"),
        Conversation.objects.get(owner=user, session_id__contains=":branch:"),
    ]


def test_a_jsonl_export_imports_back_to_identical_messages_and_parts(sources, tmp_path):
    other = UserFactory(username="second")
    for original in sources:
        path = tmp_path / f"{original.pk}.jsonl"
        path.write_text("".join(exporters.export_jsonl(original)), encoding="utf-8")
        report = import_file(format="jsonl", path=path, owner=other, session_id="copy")
        assert report.errors == []
        copy = Conversation.objects.get(owner=other, session_id="copy")
        assert _rows(copy) == _rows(original)
        assert "".join(exporters.export_jsonl(copy)) == path.read_text(encoding="utf-8")
        Conversation.objects.filter(pk=copy.pk).update(session_id=f"done-{original.pk}")


@pytest.mark.process(portable=True)
def test_a_jsonl_export_imports_into_a_fresh_database_byte_for_byte(sources, tmp_path):
    exports = []
    for original in sources[:2]:
        path = tmp_path / f"{original.pk}.jsonl"
        path.write_text("".join(exporters.export_jsonl(original)), encoding="utf-8")
        exports.append(path)
    env = {
        **os.environ,
        "LCM_DATABASE_URL": "",
        "DATABASE_URL": "",
        "LCM_DATA_DIR": str(tmp_path / "fresh"),
    }
    script = "\n".join(
        [
            "import django, sys; django.setup()",
            "from django.core.management import call_command",
            "from django.contrib.auth import get_user_model",
            "from conversations.models import Conversation",
            "from importers import exporters",
            "from importers.services import import_file",
            "call_command('migrate', verbosity=0)",
            "user = get_user_model().objects.create(username='fresh')",
            "for i, path in enumerate(sys.argv[1:]):",
            "    import_file(format='jsonl', path=path, owner=user, session_id=f's{i}')",
            "    c = Conversation.objects.get(session_id=f's{i}')",
            "    open(path + '.again', 'w', encoding='utf-8').write("
            "''.join(exporters.export_jsonl(c)))",
        ]
    )
    subprocess.run(
        [sys.executable, "-c", script, *map(str, exports)],
        cwd=MAIN,
        env={**env, "DJANGO_SETTINGS_MODULE": "lcmsite.settings"},
        check=True,
        timeout=300,
    )
    for path in exports:
        assert Path(f"{path}.again").read_bytes() == path.read_bytes()


def test_anthropic_and_openai_exports_import_back_to_the_same_export(sources, tmp_path):
    other = UserFactory(username="third")
    original = sources[0]
    for fmt, export in (
        ("anthropic", exporters.export_anthropic),
        ("openai", exporters.export_openai),
    ):
        first = export(original)
        path = tmp_path / f"{fmt}.json"
        path.write_text(json.dumps(first), encoding="utf-8")
        report = import_file(format=fmt, path=path, owner=other, session_id=f"back-{fmt}")
        assert report.errors == []
        copy = Conversation.objects.get(owner=other, session_id=f"back-{fmt}")
        assert export(copy) == first


def test_the_anthropic_export_is_a_valid_messages_body(sources):
    body = exporters.export_anthropic(sources[0])
    roles = [m["role"] for m in body["messages"]]
    assert all(a != b for a, b in zip(roles, roles[1:], strict=False))  # roles alternate
    assert roles[0] == "user"
    blocks = [b for m in body["messages"] for b in m["content"]]
    uses = {b["id"] for b in blocks if b["type"] == "tool_use"}
    results = {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"}
    assert uses == results
    assert body["system"] == "Model switched to claude-sonnet-4-5"


def test_the_export_api_gives_each_format_to_the_owner_only(sources, api, other_api):
    conversation = sources[1]
    url = f"/api/v1/conversations/{conversation.pk}/export/"
    response = api.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == 120
    assert json.loads(lines[0])["external_id"].startswith("lossless-claw:")
    for fmt in ("anthropic", "openai"):
        body = api.get(url, {"format": fmt})
        assert body.status_code == 200
        assert "messages" in body.json()
    bad = api.get(url, {"format": "xml"})
    assert bad.status_code == 400
    assert bad.json()["code"] == "invalid"
    assert other_api.get(url).status_code == 404


def test_the_export_command_writes_a_file(sources, tmp_path):
    from django.core.management import call_command

    target = tmp_path / "out.jsonl"
    call_command("lcm_export", str(sources[1].pk), "--output", str(target))
    assert target.read_text(encoding="utf-8") == "".join(exporters.export_jsonl(sources[1]))
