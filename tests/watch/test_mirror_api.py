"""POST /api/v1/imports/watch/: the receiving end of a remote watcher, in-process."""

from __future__ import annotations

import json

import pytest

from conversations.models import Message
from tests.importers.agent_sessions import SESSION

from .test_watcher import linear_session

pytestmark = pytest.mark.django_db
URL = "/api/v1/imports/watch/"
PATH = f"claude-code/-work-app/{SESSION}.jsonl"


@pytest.fixture(autouse=True)
def _data_dir(data_dir):
    return data_dir


def send(api, mode: str, data: bytes = b"", offset: int = 0, path: str = PATH):
    query = f"?path={path}&mode={mode}&offset={offset}"
    return api.post(URL + query, data=data, content_type="application/octet-stream")


def lines(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def test_pieces_at_offsets_then_import(api, user):
    body = lines(linear_session(2))
    half = body.index(b"\n", len(body) // 2) + 1
    assert send(api, "append", body[:half]).json() == {"size": half}
    ahead = send(api, "append", body[half + 5 :], offset=half + 5)
    assert ahead.status_code == 409 and ahead.json()["extra"]["size"] == half
    assert send(api, "append", body[half:], offset=half).json()["size"] == len(body)
    # A retried piece (its answer was lost): cut back to its offset, written again.
    assert send(api, "append", body[half:], offset=half).json()["size"] == len(body)
    imported = send(api, "import").json()
    assert imported["imported"]["messages"] == 8 and imported["errors"] == []
    assert send(api, "import").json()["imported"]["messages"] == 0
    assert Message.objects.filter(conversation__owner=user).count() == 8


@pytest.mark.parametrize(
    "path",
    [
        "claude-code/../../etc/passwd.jsonl",
        "elsewhere/x.jsonl",
        "claude-code/-work-app/.hidden.jsonl",
        "claude-code",
        "claude-code//x.jsonl",
        "gemini/p/chats/a\x00.json",
    ],
)
def test_a_path_outside_the_agents_stores_is_refused(api, path):
    response = send(api, "append", b"{}\n", path=path)
    assert response.status_code == 400 and response.json()["code"] == "invalid"


@pytest.mark.parametrize(
    "path", ["claude-code/-work-app/notes.txt", "codex/sessions/2026/notarollout.jsonl"]
)
def test_a_file_no_agent_writes_there_is_not_found(api, path):
    assert send(api, "append", b"{}\n", path=path).status_code == 404


def test_a_mirrored_file_that_cannot_be_read_is_a_conflict_to_resend(api):
    path = "gemini/proj/chats/session-2026-05-01T10-00-ab.json"
    send(api, "replace", b'{"half', path=path)
    response = send(api, "import", path=path)
    assert response.status_code == 409 and response.json()["code"] == "not_readable"


def test_bad_requests_get_one_error_shape(api, anon_api):
    assert send(api, "sideways").status_code == 400
    assert send(api, "append", offset=-1).status_code == 400
    assert send(api, "import").status_code == 404  # not mirrored yet
    assert send(anon_api, "append", b"{}\n").status_code == 401


def test_each_user_has_their_own_mirror(api, other_api):
    send(api, "append", lines(linear_session(1)))
    assert send(other_api, "import").status_code == 404


def test_an_empty_piece_is_stored_and_a_database_log_is_refused(api):
    empty = send(api, "replace", b"", path="gemini/proj/chats/session-2026-05-01T10-00-ab.jsonl")
    assert empty.status_code == 200 and empty.json() == {"size": 0}
    wal = send(api, "replace", b"x", path="opencode/opencode.db-wal")
    assert wal.status_code == 404
