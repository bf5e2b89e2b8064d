"""The tool loop end to end: the real runner, the real anthropic/openai SDKs, local fake
servers that speak each API's streaming protocol, and the memory tools executing."""

import json

import pytest

from tests.memory.helpers import run_turn
from tests.retrieval.dag_builder import build_dag
from tests.support.fake_messages_api import (
    FakeMessagesAPI,
    anthropic_text_stream,
    anthropic_tool_use_stream,
)
from tests.support.fake_responses_api import (
    FakeResponsesAPI,
    responses_function_call_stream,
    responses_text_stream,
)
from turns import runner, services
from turns.jobs import commit_pending
from turns.models import Branch, Phase, ProviderStep

pytestmark = pytest.mark.django_db

FACT = "The deploy code for staging is BLUE-FALCON-7, kept in the ops vault."


@pytest.fixture(autouse=True)
def _runner_accepting():
    runner._shutting_down.clear()


@pytest.fixture
def anthropic_api(monkeypatch):
    with FakeMessagesAPI() as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        yield api


@pytest.fixture
def responses_api(monkeypatch):
    with FakeResponsesAPI() as api:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        yield api


@pytest.fixture
def chat(user):
    session = services.session_create(owner=user, title="chat", tools_mode="enabled")
    run_turn(session, FACT, model="offline")
    commit_pending(branch=Branch.objects.get(pk=session.active_branch_id))
    return session


@pytest.fixture
def leaf(chat):
    """A leaf summary over the first turn's two messages (what lcm_grep routes to)."""
    branch = Branch.objects.get(pk=chat.active_branch_id)
    return build_dag(branch.conversation, leaf_size=2, max_depth=0, tail=0).leaves[0]


def _tool_results(body: dict) -> list[dict]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b["type"] == "tool_result"]


def _text(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def test_anthropic_model_greps_expands_then_answers(chat, leaf, anthropic_api):
    anthropic_api.enqueue(
        anthropic_tool_use_stream("lcm_grep", {"query": "BLUE-FALCON-7"}, id="toolu_grep"),
        anthropic_tool_use_stream(
            "lcm_expand", {"summary_id": leaf.id, "include_messages": True}, id="toolu_expand"
        ),
        anthropic_text_stream("The staging deploy code is BLUE-FALCON-7."),
    )
    turn = run_turn(chat, "What is the staging deploy code?", model="sonnet")
    assert turn.phase == Phase.RESPONSE_FINALIZED
    assert (
        turn.final_assistant_message["rendered_text"] == "The staging deploy code is BLUE-FALCON-7."
    )
    bodies = [r.body for r in anthropic_api.requests]
    assert len(bodies) == 3
    assert [t["name"] for t in bodies[0]["tools"]][:2] == ["lcm_describe", "lcm_grep"]
    grep_results = _tool_results(bodies[1])
    assert [(r["tool_use_id"], r.get("is_error", False)) for r in grep_results] == [
        ("toolu_grep", False)
    ]
    # the tool_result answers the tool_use of the message right before it, first in its message
    assert bodies[1]["messages"][-2]["content"][-1]["id"] == "toolu_grep"
    assert bodies[1]["messages"][-1]["content"][0]["type"] == "tool_result"
    hits = json.loads(_text(grep_results[0]))["results"]
    assert any(h["type"] == "message" and h["covered_by"] == leaf.id for h in hits)
    expand_results = _tool_results(bodies[2])
    assert expand_results[0]["tool_use_id"] == "toolu_expand"
    assert FACT in _text(expand_results[0])
    steps = list(ProviderStep.objects.filter(turn=turn).order_by("step_index"))
    assert [s.step_index for s in steps] == [0, 1, 2]
    assert [s.outcome["status"] for s in steps] == ["paused", "paused", "completed"]
    # indexing the turn puts each tool result in a chunk of its own
    from memory.indexing import index_turn
    from memory.models import Chunk, ChunkType

    index_turn(turn_id=turn.id)
    chunks = Chunk.objects.filter(source_turn=turn)
    tool_chunks = [c for c in chunks if c.chunk_type == ChunkType.TOOL_RESULT]
    assert len(tool_chunks) == 2
    assert any(FACT in c.rendered_text for c in tool_chunks)


def test_a_tool_error_goes_back_to_the_model_and_the_turn_goes_on(chat, anthropic_api):
    anthropic_api.enqueue(
        anthropic_tool_use_stream("lcm_expand", {"summary_id": "sum_missing"}, id="toolu_bad"),
        anthropic_text_stream("I could not find that summary."),
    )
    turn = run_turn(chat, "Expand the old summary.", model="sonnet")
    assert turn.phase == Phase.RESPONSE_FINALIZED
    results = _tool_results(anthropic_api.requests[1].body)
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [("toolu_bad", True)]
    assert json.loads(_text(results[0]))["code"] == "not_found"


def test_a_tool_call_storm_stops_at_the_step_bound(chat, anthropic_api, settings):
    settings.LCM_TURN_MAX_STEPS = 3
    anthropic_api.enqueue(
        *[
            anthropic_tool_use_stream("memory_search", {"query": f"again {i}"}, id=f"toolu_{i}")
            for i in range(5)
        ]
    )
    turn = run_turn(chat, "Search forever.", model="sonnet")
    assert turn.phase == Phase.FAILED
    assert turn.error["code"] == "tool_step_limit"
    assert len(anthropic_api.requests) == 3
    assert ProviderStep.objects.filter(turn=turn).count() == 3


def test_a_tool_call_in_disabled_mode_fails_and_runs_nothing(chat, anthropic_api):
    from memory.models import Chunk

    before = Chunk.objects.count()
    anthropic_api.enqueue(anthropic_tool_use_stream("pin_fact", {"text": "injected"}))
    turn = run_turn(chat, "Pin it.", model="sonnet", tools_mode="disabled")
    assert turn.phase == Phase.FAILED
    assert turn.error["code"] == "tool_call_in_disabled_mode"
    assert "tools" not in anthropic_api.requests[0].body
    assert len(anthropic_api.requests) == 1
    head = Branch.objects.get(pk=turn.branch_id).head_state
    assert all(p["text"] != "injected" for p in head.pinned_facts)
    assert Chunk.objects.count() == before


def test_openai_responses_model_greps_expands_then_answers(chat, leaf, responses_api):
    responses_api.enqueue(
        responses_function_call_stream("lcm_grep", {"query": "BLUE-FALCON-7"}, call_id="call_g"),
        responses_function_call_stream(
            "lcm_expand", {"summary_id": leaf.id, "include_messages": True}, call_id="call_e"
        ),
        responses_text_stream("It is BLUE-FALCON-7."),
    )
    turn = run_turn(chat, "What is the staging deploy code?", model="gpt")
    assert turn.phase == Phase.RESPONSE_FINALIZED
    assert turn.final_assistant_message["rendered_text"] == "It is BLUE-FALCON-7."
    bodies = [r.body for r in responses_api.requests]
    assert len(bodies) == 3
    outputs = [i for i in bodies[1]["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_g"]
    assert leaf.id in outputs[0]["output"]
    outputs = [i for i in bodies[2]["input"] if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_g", "call_e"]
    assert FACT in outputs[1]["output"]
