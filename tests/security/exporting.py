"""Taking an export through the API as a client does: ask (202: the job), let the worker
build it (here: at the commit), read the job, download the archive."""

from __future__ import annotations


def export_job(api, body: dict, capture) -> dict:
    with capture(execute=True):
        asked = api.post("/api/v1/exports/", body, format="json")
    assert asked.status_code == 202, asked.content
    assert asked["Location"] == asked.json()["url"]
    job = api.get(asked.json()["url"])
    assert job.status_code == 200, job.content
    return job.json()


def export_download(api, body: dict, capture):
    """The finished job's archive response (its bytes: `b"".join(r.streaming_content)`)."""
    job = export_job(api, body, capture)
    assert job["state"] == "done", job
    response = api.get(job["download"])
    assert response.status_code == 200, response
    return response
