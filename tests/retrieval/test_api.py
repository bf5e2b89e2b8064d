"""The retrieval endpoints: the access matrix, the error shape, and what each returns."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from conversations.models import Message, Summary
from largefiles.models import LargeFile
from retrieval.models import DelegationGrant
from tests.factories import append_messages
from tests.retrieval.dag_builder import build_dag

pytestmark = pytest.mark.django_db

ERROR_KEYS = {"code", "message", "extra"}


def calls(conversation, dag):
    """One valid request per endpoint, for the access matrix."""
    top = dag.top[0].id
    return [
        ("get", f"/api/v1/describe/{top}/", None),
        ("post", "/api/v1/grep/", {"query": "pytest", "conversation_id": conversation.pk}),
        ("post", "/api/v1/expand/", {"summary_id": top}),
        ("post", "/api/v1/expansions/", {"prompt": "what failed?", "summary_ids": [top]}),
        ("post", "/api/v1/tools/call/", {
            "name": "lcm_describe", "input": {"id": top}, "conversation_id": conversation.pk,
        }),
    ]  # fmt: skip


def send(client, method, url, body):
    if method == "get":
        return client.get(url)
    return client.post(url, body, format="json")


def test_anonymous_callers_get_401_in_the_error_shape(anon_api, compacted):
    conversation, dag = compacted
    for method, url, body in [*calls(conversation, dag), ("get", "/api/v1/tools/", None)]:
        response = send(anon_api, method, url, body)
        assert response.status_code == 401, url
        assert set(response.json()) == ERROR_KEYS


def test_another_user_gets_404_for_everything_of_the_owner(other_api, compacted):
    conversation, dag = compacted
    for method, url, body in calls(conversation, dag):
        response = send(other_api, method, url, body)
        assert response.status_code == 404, (url, response.content)
        assert set(response.json()) == ERROR_KEYS
    assert DelegationGrant.objects.count() == 0  # nothing was granted on their behalf


def test_owner_and_staff_get_200_from_every_endpoint(api, staff_api, compacted):
    conversation, dag = compacted
    for client in (api, staff_api):
        for method, url, body in [*calls(conversation, dag), ("get", "/api/v1/tools/", None)]:
            response = send(client, method, url, body)
            assert response.status_code == 200, (url, response.content)


def test_another_users_grep_does_not_see_the_owners_messages(other_api, compacted):
    response = other_api.post("/api/v1/grep/", {"query": "pytest"}, format="json")
    assert response.status_code == 200
    assert response.json() == {"results": []}


def test_describe_summary_has_lineage_range_and_manifest(api, compacted):
    _, dag = compacted
    top = dag.top[0]
    body = api.get(f"/api/v1/describe/{top.id}/").json()
    assert body["type"] == "summary" and body["kind"] == "condensed" and body["depth"] == 1
    assert [p["id"] for p in body["parents"]] == [leaf.id for leaf in dag.leaves]
    assert body["children"] == []
    assert body["source_seq_range"] == [1, 40]
    assert body["manifest"]["message_count"] == 40
    assert body["manifest"]["summaries_by_depth"] == [
        {"depth": 1, "count": 1, "tokens": 30},
        {"depth": 0, "count": 4, "tokens": 80},
    ]
    leaf = api.get(f"/api/v1/describe/{dag.leaves[0].id}/").json()
    assert leaf["children"] == [{"id": top.id, "kind": "condensed", "depth": 1, "token_count": 30}]
    assert leaf["source_seq_range"] == [1, 10]


def test_describe_unknown_ids_are_404(api, compacted):
    for item_id in ("sum_0000000000000000", "file_0000000000000000", "nonsense"):
        response = api.get(f"/api/v1/describe/{item_id}/")
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


@override_settings(LCM_LARGE_FILE_TOKEN_THRESHOLD=100)
def test_describe_file_names_its_referencing_messages_and_summaries(api, other_api, conversation):
    rows = "\n".join(f"{i},name-{i},{i * 7}" for i in range(400))
    content = f'here is the export <file name="data.csv">id,name,score\n{rows}\n</file> done'
    (message,) = append_messages(
        conversation, 1, payload=lambda i: {"role": "user", "content": content}
    )
    append_messages(conversation, 1, start=1)
    (file_id,) = message.file_ids
    large_file = LargeFile.objects.get(pk=file_id)
    leaf = build_dag(conversation, leaf_size=10, max_depth=0, tail=1).leaves[0]
    body = api.get(f"/api/v1/describe/{file_id}/").json()
    assert body["type"] == "file" and body["id"] == file_id
    assert body["file_name"] == "data.csv"
    assert body["byte_size"] == large_file.byte_size > 0
    assert body["exploration_summary"] == large_file.exploration_summary != ""
    assert body["referenced_by_messages"] == [{"id": message.pk, "seq": 1, "role": "user"}]
    assert body["referenced_by_summaries"] == [{"id": leaf.id, "kind": "leaf", "depth": 0}]
    assert other_api.get(f"/api/v1/describe/{file_id}/").status_code == 404


def test_grep_api_validates_input_in_the_error_shape(api, conversation):
    cases = [
        {},
        {"query": ""},
        {"query": "x", "mode": "fuzzy"},
        {"query": "x", "scope": "attachments"},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 201},
        {"query": "x", "since": "yesterday"},
        {"query": "x", "sort": "random"},
        {"query": "(", "mode": "regex"},
    ]
    for body in cases:
        response = api.post("/api/v1/grep/", body, format="json")
        assert response.status_code == 400, body
        assert set(response.json()) == ERROR_KEYS
    assert (
        api.post("/api/v1/grep/", {"query": "(", "mode": "regex"}, format="json").json()["code"]
        == "invalid_regex"
    )


def test_grep_api_returns_results(api, conversation):
    (message,) = append_messages(
        conversation, 1, payload=lambda i: {"role": "user", "content": "the quokka jumped"}
    )
    body = api.post("/api/v1/grep/", {"query": "quokka"}, format="json").json()
    assert [r["id"] for r in body["results"]] == [message.pk]
    hit = body["results"][0]
    assert hit["conversation_id"] == conversation.pk
    assert hit["seq"] == 1 and hit["covered_by"] is None
    assert hit["created_at"].endswith("Z")  # aware UTC on both databases
    # SQLite's snippet() keeps the leading stop word, ts_headline's fragments start at it.
    assert hit["snippet"] in ("the «quokka» jumped", "«quokka» jumped")


def test_expand_api_returns_summaries_and_messages_with_truncation(api, compacted):
    conversation, dag = compacted
    top = dag.top[0].id
    body = api.post(
        "/api/v1/expand/",
        {"summary_id": top, "depth": 2, "include_messages": True, "token_cap": 100},
        format="json",
    ).json()
    assert [s["id"] for s in body["summaries"]] == [leaf.id for leaf in dag.leaves]
    assert body["truncated"] is True
    assert body["token_estimate"] <= 100
    kept = [m["id"] for m in body["messages"]]
    every = list(
        Message.objects.filter(conversation=conversation, seq__lte=40)
        .order_by("seq")
        .values_list("id", flat=True)
    )
    assert 0 < len(kept) < 10 and kept == every[: len(kept)]
    assert body["messages"][0]["created_at"].endswith("Z")
    assert body["summaries"][0]["created_at"].endswith("Z")
    # The first leaf was cut part way (its remaining message ids), the other three leaves
    # did not fit at all (their ids: expand them next).
    assert body["omitted_ids"] == every[len(kept) : 10] + [leaf.id for leaf in dag.leaves[1:]]
    assert body["omitted_message_count"] == 40 - len(kept)


def test_expand_api_rejects_bad_depth_and_unknown_summaries(api, compacted):
    _, dag = compacted
    for body, status in [
        ({"summary_id": dag.top[0].id, "depth": 0}, 400),
        ({"summary_id": dag.top[0].id, "depth": 11}, 400),
        ({"summary_id": dag.top[0].id, "token_cap": 0}, 400),
        ({"summary_id": "sum_ffffffffffffffff"}, 404),
    ]:
        response = api.post("/api/v1/expand/", body, format="json")
        assert response.status_code == status, body
        assert set(response.json()) == ERROR_KEYS


def test_tools_list_has_the_four_tools_in_anthropic_format(api):
    tools = api.get("/api/v1/tools/").json()["tools"]
    assert [t["name"] for t in tools] == [
        "lcm_describe",
        "lcm_grep",
        "lcm_expand",
        "lcm_expand_query",
    ]
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        assert tool["input_schema"]["type"] == "object"


def test_tool_call_runs_each_tool_as_the_caller(api, compacted):
    conversation, dag = compacted
    top = dag.top[0].id

    def call(name, input):
        response = api.post(
            "/api/v1/tools/call/",
            {"name": name, "input": input, "conversation_id": conversation.pk},
            format="json",
        )
        assert response.status_code == 200, response.content
        return response.json()

    described = call("lcm_describe", {"id": top})
    assert described["is_error"] is False
    assert json.loads(described["content"])["id"] == top
    grep = json.loads(call("lcm_grep", {"query": "Message 3:", "mode": "regex"})["content"])
    assert grep["results"][0]["covered_by"] == top
    expanded = json.loads(call("lcm_expand", {"summary_id": top})["content"])
    assert [s["id"] for s in expanded["summaries"]] == [leaf.id for leaf in dag.leaves]
    query = json.loads(
        call("lcm_expand_query", {"prompt": "why?", "summary_ids": [top]})["content"]
    )
    assert query["mode"] == "offline" and top in query["cited_ids"]


def test_tool_call_input_problems_are_error_results_not_http_errors(api, compacted):
    conversation, _ = compacted
    for name, input in [
        ("lcm_expand", {"summary_id": "sum_ffffffffffffffff"}),
        ("lcm_expand", {"summary_id": 7}),
        ("lcm_grep", {"query": "(", "mode": "regex"}),
        ("lcm_describe", {}),
    ]:
        response = api.post(
            "/api/v1/tools/call/",
            {"name": name, "input": input, "conversation_id": conversation.pk},
            format="json",
        )
        assert response.status_code == 200
        body = response.json()
        assert body["is_error"] is True
        assert set(json.loads(body["content"])) == ERROR_KEYS


def test_tool_call_unknown_tool_is_a_400(api, conversation):
    response = api.post(
        "/api/v1/tools/call/",
        {"name": "rm_rf", "input": {}, "conversation_id": conversation.pk},
        format="json",
    )
    assert response.status_code == 400
    assert "unknown tool" in response.json()["message"]


def test_lcm_command_prints_json_and_respects_user(capsys, user, other_user, compacted):
    _, dag = compacted
    top = dag.top[0].id
    call_command("lcm", "describe", top)
    assert json.loads(capsys.readouterr().out)["id"] == top
    call_command("lcm", "--user", user.username, "expand", top, "--depth", "1")
    assert len(json.loads(capsys.readouterr().out)["summaries"]) == 4
    call_command("lcm", "grep", "failing", "--scope", "messages", "--limit", "3")
    assert len(json.loads(capsys.readouterr().out)["results"]) == 3
    with pytest.raises(CommandError, match="not_found"):
        call_command("lcm", "--user", other_user.username, "describe", top)
    assert Summary.objects.filter(pk=top).exists()


def test_grep_and_expand_latencies_are_exported_as_metrics(api, anon_api, compacted):
    _, dag = compacted
    api.post("/api/v1/grep/", {"query": "failing"}, format="json")
    api.post("/api/v1/expand/", {"summary_id": dag.top[0].id}, format="json")
    text = anon_api.get("/metrics").content.decode()
    assert 'lcm_search_latency_ms_count{mode="full_text"}' in text
    assert 'lcm_expand_latency_ms_count{kind="expand"}' in text
    assert "lcm_delegation_grants_active 0" in text


def test_grants_are_read_only_in_the_admin(client, staff_user, user, compacted):
    from retrieval import services

    conversation, _ = compacted
    grant = services.grant_create(owner=user, conversation_ids=[conversation.pk], token_cap=5)
    staff_user.is_superuser = True
    staff_user.save()
    client.force_login(staff_user)
    listing = client.get("/admin/retrieval/delegationgrant/")
    assert listing.status_code == 200 and grant.pk in listing.content.decode()
    assert client.get("/admin/retrieval/delegationgrant/add/").status_code == 403
