"""GET /api/v1/files/{id}/ and /content/: access, shapes, ranges, and safe serving."""

from __future__ import annotations

import hashlib

import pytest

from conversations.inputs import parse_message
from conversations.largefiles.store import file_storage
from conversations.models import LargeFile
from conversations.services import messages_append
from tests.largefile_support import large_file_storage  # noqa: F401

pytestmark = pytest.mark.usefixtures("large_file_storage")

BODY = "".join(f"line {i}: the quick brown fox — ünïcödé {i}\n" for i in range(400))
DATA = BODY.encode()


@pytest.fixture(autouse=True)
def small_limits(settings):
    settings.LCM_LARGE_FILE_TOKEN_THRESHOLD = 1000
    settings.LCM_FILE_PREVIEW_BYTES = 4096


@pytest.fixture
def stored(conversation) -> LargeFile:
    content = f'<file name="notes.txt" mime="text/plain">{BODY}</file>'
    messages_append(
        conversation_id=conversation.pk,
        messages=[parse_message({"role": "user", "content": content})],
    )
    return LargeFile.objects.get(conversation=conversation)


def detail(file_id: str) -> str:
    return f"/api/v1/files/{file_id}/"


def content(file_id: str, query: str = "") -> str:
    return f"/api/v1/files/{file_id}/content/{query}"


def test_the_owner_reads_the_metadata_and_summary(api, stored, conversation):
    response = api.get(detail(stored.id))
    assert response.status_code == 200
    assert response.json() == {
        "id": stored.id,
        "conversation_id": conversation.pk,
        "file_name": "notes.txt",
        "mime_type": "text/plain",
        "byte_size": len(DATA),
        "line_count": 400,
        "token_count": stored.token_count,
        "sha256": hashlib.sha256(DATA).hexdigest(),
        "tool_name": "",
        "exploration_summary": stored.exploration_summary,
        "created_at": response.json()["created_at"],
    }
    assert stored.exploration_summary.startswith("Text: 400 lines")


def test_the_content_is_served_raw_in_ranges(api, stored):
    first = api.get(content(stored.id))
    assert first.status_code == 200
    assert first["Content-Type"] == "text/plain; charset=utf-8"
    assert first.content == DATA[:4096]
    assert first["X-LCM-File-Size"] == str(len(DATA))
    assert first["X-LCM-Offset"] == "0"
    assert first["X-LCM-Next-Offset"] == "4096"
    assert first["X-Content-Type-Options"] == "nosniff"
    assert first["Content-Disposition"] == f'attachment; filename="{stored.id}"'
    # Walk the whole file by next offsets and get exactly the original bytes.
    chunks, offset = [], 0
    while True:
        page = api.get(content(stored.id, f"?offset={offset}&limit=1000"))
        chunks.append(page.content)
        if "X-LCM-Next-Offset" not in page:
            break
        offset = int(page["X-LCM-Next-Offset"])
    assert b"".join(chunks) == DATA
    end = api.get(content(stored.id, f"?offset={len(DATA)}"))
    assert (end.status_code, end.content) == (200, b"")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?limit=4097", "limit"),
        ("?limit=0", "limit"),
        ("?offset=-1", "offset"),
        ("?offset=abc", "offset"),
        ("?offset=１２", "offset"),
        ("?offset=99999999", "offset"),
    ],
)
def test_bad_ranges_are_a_400(api, stored, query, field):
    response = api.get(content(stored.id, query))
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert body["extra"]["field"] == field


def test_another_user_gets_the_same_404_as_a_missing_file(other_api, stored):
    for url in (detail(stored.id), content(stored.id)):
        response = other_api.get(url)
        assert response.status_code == 404
        assert response.json() == {
            "code": "not_found",
            "message": f"file {stored.id} not found",
            "extra": {"file_id": stored.id},
        }
    missing = other_api.get(detail("file_0000000000000000"))
    assert missing.status_code == 404
    assert missing.json()["message"] == "file file_0000000000000000 not found"


def test_anonymous_gets_401(anon_api, stored):
    for url in (detail(stored.id), content(stored.id)):
        response = anon_api.get(url)
        assert response.status_code == 401
        assert set(response.json()) == {"code", "message", "extra"}


def test_staff_read_any_file(staff_api, stored):
    assert staff_api.get(detail(stored.id)).status_code == 200
    assert staff_api.get(content(stored.id)).content == DATA[:4096]


def test_html_is_served_as_an_attachment_in_a_sandbox(api, conversation):
    page = "<html><script>alert(1)</script>" + "<p>para</p>\n" * 600 + "</html>"
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            parse_message(
                {"role": "user", "content": f'<file name="x.html" mime="text/html">{page}</file>'}
            )
        ],
    )
    row = LargeFile.objects.get(conversation=conversation)
    response = api.get(content(row.id, "?limit=100"))
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["Content-Security-Policy"] == "sandbox; default-src 'none'"


def test_reading_a_file_is_two_queries(api, stored, django_assert_num_queries):
    # The file row, then the access checkpoint (the token lookup is DRF's own).
    with django_assert_num_queries(3):
        api.get(detail(stored.id))


def test_a_missing_object_is_a_clear_503_not_a_crash(api, stored):
    file_storage().delete(stored.storage_key)
    response = api.get(content(stored.id))
    assert response.status_code == 503
    assert response.json() == {
        "code": "file_content_missing",
        "message": f"the stored content of file {stored.id} is missing",
        "extra": {"file_id": stored.id},
    }
    assert api.get(detail(stored.id)).status_code == 200
