from __future__ import annotations

import pytest
from django_q.models import OrmQ

from compaction.models import CompactionJob, CompactionRun
from conversations.models import Summary
from tests.factories import append_messages


@pytest.fixture
def small_chunks(small_chunks):
    small_chunks.LCM_AUTOCOMPACT_DISABLED = True
    return small_chunks


@pytest.fixture
def sync_jobs(settings):
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}


def compact_url(conversation):
    return f"/api/v1/conversations/{conversation.pk}/compact/"


def assemble_url(conversation):
    return f"/api/v1/conversations/{conversation.pk}/assemble/"


def test_compact_with_wait_returns_the_result(api, conversation, small_chunks):
    append_messages(conversation, 120)

    response = api.post(compact_url(conversation), {"mode": "full", "wait": True}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "compacted"
    assert body["summaries_created"] == list(
        CompactionRun.objects.get(pk=body["run_id"]).summary_ids
    )
    assert set(body["summaries_created"]) == set(
        Summary.objects.filter(conversation=conversation).values_list("id", flat=True)
    )
    assert body["tokens_after"] < body["tokens_before"]
    assert body["passes"] == len(body["summaries_created"])


def test_compact_without_wait_queues_one_real_job(
    api, conversation, small_chunks, django_capture_on_commit_callbacks
):
    append_messages(conversation, 50)

    with django_capture_on_commit_callbacks(execute=True):
        first = api.post(compact_url(conversation), {"mode": "incremental"}, format="json")
        second = api.post(compact_url(conversation), {"mode": "full"}, format="json")

    assert first.status_code == 202
    assert first.json()["state"] == "pending"
    assert first.json()["mode"] == "incremental"
    assert second.status_code == 202
    assert second.json()["id"] == first.json()["id"]
    assert CompactionJob.objects.filter(conversation=conversation).count() == 1
    assert OrmQ.objects.count() == 1
    assert not Summary.objects.filter(conversation=conversation).exists()


def test_a_queued_job_runs_and_its_result_is_readable(
    api, conversation, small_chunks, sync_jobs, django_capture_on_commit_callbacks
):
    append_messages(conversation, 120)

    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(compact_url(conversation), {"mode": "full"}, format="json")
    job = api.get(f"/api/v1/jobs/{response.json()['id']}/")

    assert response.status_code == 202
    assert job.status_code == 200
    assert job.json()["state"] == "succeeded"
    assert job.json()["result"]["status"] == "compacted"
    assert job.json()["attempts"] == 1
    assert Summary.objects.filter(conversation=conversation).count() == len(
        job.json()["result"]["summaries_created"]
    )


@pytest.mark.parametrize(
    "body, field",
    [
        ({"mode": "sideways"}, "mode"),
        ({"mode": "full", "target_tokens": -1}, "target_tokens"),
        ({"mode": "full", "wiat": True}, "wiat"),
    ],
)
def test_bad_compact_input_is_a_400_and_stores_nothing(api, conversation, body, field):
    append_messages(conversation, 30)

    response = api.post(compact_url(conversation), body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "invalid"
    assert list(response.json()["extra"]["fields"]) == [field]
    assert not CompactionJob.objects.exists()
    assert not CompactionRun.objects.exists()


def test_access_to_compact_jobs_and_assemble(
    api, other_api, staff_api, anon_api, conversation, small_chunks
):
    append_messages(conversation, 20)
    job = api.post(compact_url(conversation), {}, format="json").json()

    assert anon_api.post(compact_url(conversation), {}, format="json").status_code == 401
    assert anon_api.post(assemble_url(conversation), {}, format="json").status_code == 401
    assert anon_api.get(f"/api/v1/jobs/{job['id']}/").status_code == 401
    assert other_api.post(compact_url(conversation), {}, format="json").status_code == 404
    assert other_api.post(assemble_url(conversation), {}, format="json").status_code == 404
    assert other_api.get(f"/api/v1/jobs/{job['id']}/").status_code == 404
    assert staff_api.get(f"/api/v1/jobs/{job['id']}/").status_code == 200
    assert staff_api.post(assemble_url(conversation), {}, format="json").status_code == 200
    assert api.get("/api/v1/jobs/999999/").status_code == 404
    assert CompactionJob.objects.count() == 1


def test_assemble_returns_the_requested_format(api, conversation, small_chunks):
    append_messages(conversation, 12)

    response = api.post(
        assemble_url(conversation),
        {"format": "anthropic", "system": "You are terse.", "token_budget": 5000},
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert body["format"] == "anthropic"
    assert body["system"] == "You are terse."
    assert body["token_budget"] == 5000
    assert body["messages"][0]["role"] == "user"
    assert len(body["items"]) == 12
    assert body["dropped"] == []


def test_assemble_rejects_an_unknown_format(api, conversation):
    response = api.post(assemble_url(conversation), {"format": "gemini"}, format="json")

    assert response.status_code == 400
    assert response.json()["extra"]["fields"] == {"format": ['"gemini" is not a valid choice.']}


def test_a_running_compaction_makes_a_second_one_a_409_with_retry_after(
    api, conversation, small_chunks
):
    from django.utils import timezone

    append_messages(conversation, 60)
    CompactionRun.objects.create(
        conversation=conversation, reason="manual", mode="full", started_at=timezone.now()
    )

    response = api.post(compact_url(conversation), {"wait": True}, format="json")

    assert response.status_code == 409
    assert response.json()["code"] == "conflict"
    assert response.headers["Retry-After"] == "2"
    assert not Summary.objects.filter(conversation=conversation).exists()


def test_compact_until_under_a_target_through_the_api(api, conversation, small_chunks):
    append_messages(conversation, 150)

    response = api.post(
        compact_url(conversation),
        {"mode": "until_under", "target_tokens": 1500, "wait": True},
        format="json",
    )

    body = response.json()
    assert response.status_code == 200
    assert body["status"] == "compacted"
    assert body["tokens_before"] > 1500 >= body["tokens_after"]
    assert CompactionRun.objects.get(pk=body["run_id"]).target_tokens == 1500


def test_assemble_can_return_the_summaries_apart_for_a_cacheable_prefix(
    api, conversation, small_chunks
):
    from compaction.engine import compact_conversation

    append_messages(conversation, 60)
    compact_conversation(conversation_id=conversation.pk, mode="full")
    body = {"format": "anthropic", "split_summaries": True, "system": "Be exact."}
    response = api.post(assemble_url(conversation), body, format="json")
    assert response.status_code == 200
    data = response.json()
    ids = [i["id"] for i in data["items"] if i["type"] == "summary"]
    assert ids and [s.split('"')[1] for s in data["summaries"]] == ids
    assert data["system"] == "Be exact."
    assert "<summary id=" not in str(data["messages"])
    plain = api.post(assemble_url(conversation), {"format": "anthropic"}, format="json").json()
    assert "summaries" not in plain
    refused = api.post(assemble_url(conversation), {"split_summaries": "perhaps"}, format="json")
    assert refused.status_code == 400
