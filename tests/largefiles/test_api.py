"""GET /api/v1/files/{id}/ and /content/: access, shapes, ranges, and safe serving."""

from __future__ import annotations

import hashlib

import pytest

from conversations.inputs import parse_message
from conversations.services import messages_append
from largefiles.models import LargeFile
from largefiles.store import file_storage
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


# --- Standard Range and conditional requests ----------------------------------------


def test_a_range_request_gets_206_with_content_range(api, stored):
    etag = f'"{stored.sha256}"'
    for header, start, end in [
        ("bytes=0-99", 0, 99),
        ("bytes=100-", 100, 100 + 4096 - 1),  # open-ended: shortened to the preview cap
        ("bytes=-50", len(DATA) - 50, len(DATA) - 1),
        ("bytes=10-999999999", 10, 10 + 4096 - 1),
        (f"bytes={len(DATA) - 5}-{len(DATA) + 100}", len(DATA) - 5, len(DATA) - 1),
    ]:
        response = api.get(content(stored.id), HTTP_RANGE=header)
        assert response.status_code == 206, header
        assert response.content == DATA[start : end + 1], header
        assert response["Content-Range"] == f"bytes {start}-{end}/{len(DATA)}"
        assert response["ETag"] == etag
        assert response["Accept-Ranges"] == "bytes"
        assert response["X-LCM-Offset"] == str(start)
        assert response["X-Content-Type-Options"] == "nosniff"


def test_walking_a_file_by_ranges_gives_back_the_exact_bytes(api, stored):
    chunks, start = [], 0
    while start < len(DATA):
        response = api.get(content(stored.id), HTTP_RANGE=f"bytes={start}-")
        assert response.status_code == 206
        chunks.append(response.content)
        start = int(response["Content-Range"].split("-")[1].split("/")[0]) + 1
    assert b"".join(chunks) == DATA


def test_a_range_past_the_end_is_416_in_the_error_shape(api, stored):
    for header in [f"bytes={len(DATA)}-", f"bytes={len(DATA) + 10}-{len(DATA) + 20}", "bytes=-0"]:
        response = api.get(content(stored.id), HTTP_RANGE=header)
        assert response.status_code == 416, header
        assert response["Content-Range"] == f"bytes */{len(DATA)}"
        body = response.json()
        assert body["code"] == "range_not_satisfiable"
        assert body["extra"] == {"byte_size": len(DATA)}


def test_multiple_ranges_other_units_and_bad_headers_are_ignored(api, stored):
    for header in ["bytes=0-10,20-30", "items=0-5", "bytes=abc", "bytes=50-10", "bytes=-"]:
        response = api.get(content(stored.id), HTTP_RANGE=header)
        assert response.status_code == 200, header
        assert response.content == DATA[:4096]
        assert "Content-Range" not in response


def test_if_range_with_another_validator_sends_the_whole_answer(api, stored):
    stale = api.get(content(stored.id), HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE='"other"')
    assert stale.status_code == 200
    assert stale.content == DATA[:4096]
    fresh = api.get(content(stored.id), HTTP_RANGE="bytes=0-9", HTTP_IF_RANGE=f'"{stored.sha256}"')
    assert fresh.status_code == 206
    assert fresh.content == DATA[:10]


def test_if_none_match_with_the_etag_is_304_without_a_body(api, stored):
    etag = api.get(content(stored.id))["ETag"]
    assert etag == f'"{stored.sha256}"'
    for header in [etag, f"W/{etag}", f'"nope", {etag}', "*"]:
        response = api.get(content(stored.id), HTTP_IF_NONE_MATCH=header)
        assert response.status_code == 304, header
        assert response.content == b""
        assert response["ETag"] == etag
    changed = api.get(content(stored.id, "?offset=5&limit=5"), HTTP_IF_NONE_MATCH='"nope"')
    assert changed.status_code == 200
    assert changed.content == DATA[5:10]
    assert changed["ETag"] == etag


def test_range_and_offset_together_are_a_400(api, stored):
    response = api.get(content(stored.id, "?offset=5"), HTTP_RANGE="bytes=0-9")
    assert response.status_code == 400
    assert response.json()["extra"] == {"field": "Range"}


def test_another_user_gets_404_not_304_or_206(other_api, stored):
    for headers in [{"HTTP_RANGE": "bytes=0-9"}, {"HTTP_IF_NONE_MATCH": "*"}]:
        response = other_api.get(content(stored.id), **headers)
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
