"""Clients generated from the schema work: `openapi-python-client` (offline, from the
served /api/v1/schema/) generates a Python package, which drives a conversation against a
real server: create, append, assemble, grep, compact, describe and expand a summary."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.process(portable=True)


@pytest.fixture(scope="session")
def lcm_client(contract_server, tmp_path_factory):
    """The generated package `lcm_client`, imported (generated once per session)."""
    where = tmp_path_factory.mktemp("generated")
    schema = httpx.get(
        contract_server.url + "/api/v1/schema/?format=json", headers=contract_server.auth
    ).json()
    (where / "schema.json").write_text(json.dumps(schema))
    tool = Path(sys.executable).with_name("openapi-python-client")
    generated = subprocess.run(
        [
            str(tool),
            "generate",
            "--path",
            str(where / "schema.json"),
            "--output-path",
            str(where / "lcm_client"),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    # Every operation must be generated; only the zip export's binary body is left out.
    assert "Endpoint will not be generated" not in generated.stdout, generated.stdout
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module("lcm_client")
    finally:
        sys.path.remove(str(where))
        for name in [n for n in sys.modules if n == "lcm_client" or n.startswith("lcm_client.")]:
            del sys.modules[name]


def _api(package, name):
    return importlib.import_module(f"lcm_client.api.{package}.{name}")


def test_a_generated_client_drives_a_conversation(lcm_client, contract_server):
    from lcm_client import models

    client = lcm_client.AuthenticatedClient(
        base_url=contract_server.url,
        token=contract_server.token,
        prefix="Token",  # the scheme the schema documents (tokenAuth)
        raise_on_unexpected_status=True,
    )
    created = _api("conversations", "conversations_create").sync(
        client=client, body=models.ConversationCreateRequest(session_id="generated-client")
    )
    assert isinstance(created, models.Conversation), created
    words = ["apple", "banana", "cherry", "damson", "elder", "fig"]
    batch = models.MessageBatchInputRequest(
        messages=[
            models.MessageInputRequest(
                role=models.RoleEnum.USER if i % 2 == 0 else models.RoleEnum.ASSISTANT,
                content=f"message {i} about the {words[i % len(words)]} orchard " * 20,
            )
            for i in range(60)
        ]
    )
    appended = _api("conversations", "messages_append").sync(
        conversation_id=created.id, client=client, body=batch
    )
    assert isinstance(appended, models.AppendedBatch), appended
    assert [m.seq for m in appended.messages] == list(range(1, 61))

    single = _api("conversations", "messages_append").sync(
        conversation_id=created.id,
        client=client,
        body=models.MessageInputRequest(role=models.RoleEnum.USER, content="the damson tart"),
    )
    assert isinstance(single, models.AppendedMessage) and single.seq == 61

    found = _api("grep", "grep").sync(
        client=client,
        body=models.GrepQueryRequest(query="damson", conversation_id=created.id, limit=5),
    )
    assert isinstance(found, models.GrepResponse), found
    assert found.results and all("damson" in hit.snippet for hit in found.results)

    compacted = _api("conversations", "conversations_compact").sync(
        conversation_id=created.id, client=client, body=models.CompactRequestRequest(wait=True)
    )
    assert isinstance(compacted, models.CompactionResult), compacted
    assert compacted.summaries_created, compacted
    summary_id = compacted.summaries_created[0]

    described = _api("describe", "describe").sync(item_id=summary_id, client=client)
    assert isinstance(described, models.DescribeSummary), described
    assert described.id == summary_id and described.conversation_id == created.id

    expanded = _api("expand", "expand").sync(
        client=client,
        body=models.ExpandInputRequest(summary_id=summary_id, include_messages=True),
    )
    assert isinstance(expanded, models.ExpandResponse), expanded
    assert expanded.summary_id == summary_id and expanded.messages

    assembled = _api("conversations", "conversations_assemble").sync(
        conversation_id=created.id,
        client=client,
        body=models.AssembleRequestRequest(token_budget=2000),
    )
    assert isinstance(assembled, models.AssembledContext), assembled
    kinds = {item.type_ for item in assembled.items}
    assert kinds >= {models.AssembledItemTypeEnum.SUMMARY}, kinds
    # A message's id is an integer and a summary's a string, as the schema says.
    assert all(
        isinstance(item.id, int if item.type_ == models.AssembledItemTypeEnum.MESSAGE else str)
        for item in assembled.items
    )
