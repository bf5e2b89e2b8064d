"""File pages (large files stored aside by the real ingest) and the admin's links into
the explorer."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote  # ids hold '_', which admin URLs escape
from django.urls import reverse

from conversations.models import Summary
from largefiles.models import LargeFile
from tests.explorer.helpers import client_for
from tests.factories import append_messages

FILE_TEXT = "\n".join(f"line {i}: the cache returns stale entries after deploy" for i in range(300))


@pytest.fixture
def stored_file(file_storage, make_conversation):
    conversation = make_conversation(session_id="with-file")
    append_messages(
        conversation,
        1,
        payload=lambda i: {
            "role": "user",
            "content": f'Look at this:\n<file name="notes.txt">{FILE_TEXT}</file>',
        },
    )
    return LargeFile.objects.get(conversation=conversation)


def test_file_list_and_detail_show_metadata_and_a_bounded_preview(user, stored_file, settings):
    settings.LCM_FILE_PREVIEW_BYTES = 200
    client = client_for(user)
    listing = client.get("/files/").content.decode()
    assert f'<a href="/files/{stored_file.pk}/">{stored_file.pk}</a>' in listing
    body = client.get(f"/files/{stored_file.pk}/").content.decode()
    assert '<dd class="file-name">notes.txt</dd>' in body
    assert f"<code>{stored_file.sha256}</code>" in body
    preview = body.split('<pre class="preview" id="file-preview">')[1].split("</pre>")[0]
    assert preview == FILE_TEXT.encode()[:200].decode()
    assert "(first part only)" in body


def test_file_pages_follow_the_checkpoint(user, other_user, staff_user, stored_file):
    url = f"/files/{stored_file.pk}/"
    assert client_for(other_user).get(url).status_code == 404
    assert stored_file.pk not in client_for(other_user).get("/files/").content.decode()
    assert client_for(staff_user).get(url).status_code == 200
    assert client_for(user).get("/files/file_0000000000000000/").status_code == 404


def test_the_admin_links_conversations_summaries_and_files_to_the_explorer(
    staff_user, stored_file, compacted_by_engine
):
    client = client_for(staff_user)
    staff_user.is_superuser = True
    staff_user.save(update_fields=["is_superuser"])
    changelist = client.get("/admin/conversations/conversation/").content.decode()
    assert f'<a href="/conversations/{compacted_by_engine.pk}/dag/">summary DAG</a>' in changelist
    change = client.get(f"/admin/conversations/conversation/{compacted_by_engine.pk}/change/")
    assert (
        f'<a href="/conversations/{compacted_by_engine.pk}/dag/">summary DAG</a>'
        in change.content.decode()
    )
    summary = Summary.objects.filter(conversation=compacted_by_engine).first()
    response = client.get(reverse("admin:conversations_summary_change", args=[quote(summary.pk)]))
    assert response.status_code == 200, response.status_code
    page = response.content.decode()
    assert f'<a href="/conversations/{compacted_by_engine.pk}/dag/?summary={summary.pk}">' in page
    page = client.get(
        reverse("admin:largefiles_largefile_change", args=[quote(stored_file.pk)])
    ).content.decode()
    assert f'<a href="/files/{stored_file.pk}/">' in page
