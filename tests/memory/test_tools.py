"""The tool registry run directly against a real branch (tools as the session owner)."""

import json

import pytest

from core.tool_result import ToolResult
from memory import tools
from memory.indexing import index_turn
from retrieval.tool_definitions import TOOL_NAMES
from tests.memory.helpers import run_turn
from tests.retrieval.dag_builder import build_dag
from turns import services
from turns.models import Branch, StateCheckpoint

pytestmark = pytest.mark.django_db

FACT = "The deploy code for staging is BLUE-FALCON-7, kept in the ops vault."


@pytest.fixture
def chat(user):
    return services.session_create(owner=user, title="chat", tools_mode="enabled")


@pytest.fixture
def turn(chat):
    first = run_turn(chat, FACT)
    index_turn(turn_id=first.id)
    return run_turn(chat, "What is the deploy code?")


def test_definitions_follow_the_tools_mode():
    assert tools.definitions("disabled") == []
    names = [d["name"] for d in tools.definitions("enabled")]
    assert names == [
        "lcm_describe",
        "lcm_grep",
        "lcm_expand",
        "lcm_expand_query",
        "memory_search",
        "pin_fact",
    ]
    assert [d["name"] for d in tools.definitions("parse_only")] == names
    for definition in tools.definitions("enabled"):
        assert set(definition) == {"name", "description", "input_schema"}
        assert definition["input_schema"]["type"] == "object"
    grep = next(d for d in tools.definitions("enabled") if d["name"] == "lcm_grep")
    assert "all_conversations" not in grep["input_schema"]["properties"]
    assert set(TOOL_NAMES) < set(names)


def test_unknown_tools_and_bad_input_are_error_results(turn):
    assert tools.execute(name="rm_rf", input={}, turn=turn).is_error is True
    assert "unknown tool" in tools.execute(name="rm_rf", input={}, turn=turn).content
    missing = tools.execute(name="lcm_grep", input={}, turn=turn)
    assert missing == ToolResult("missing required field 'query'", is_error=True)
    wrong = tools.execute(name="lcm_grep", input={"query": 5}, turn=turn)
    assert wrong == ToolResult("field 'query' must be of type string", is_error=True)
    not_object = tools.execute(name="memory_search", input=["x"], turn=turn)
    assert not_object == ToolResult("tool input must be a JSON object", is_error=True)
    enum = tools.execute(name="lcm_grep", input={"query": "x", "mode": "sql"}, turn=turn)
    assert enum.is_error is True


def test_lcm_grep_finds_the_branch_messages(turn):
    result = tools.execute(name="lcm_grep", input={"query": "BLUE-FALCON-7"}, turn=turn)
    assert result.is_error is False
    hits = json.loads(result.content)["results"]
    assert {h["conversation_id"] for h in hits} == {turn.branch.conversation_id}
    assert any(h["type"] == "message" and h["seq"] == 1 for h in hits)


def test_lcm_grep_does_not_see_other_sessions(turn, user):
    other = services.session_create(owner=user, title="other")
    run_turn(other, "Unrelated: the other code is RED-OWL-3.")
    result = tools.execute(name="lcm_grep", input={"query": "RED-OWL-3"}, turn=turn)
    assert json.loads(result.content) == {"results": []}


def test_lcm_describe_and_expand_read_a_summary_of_the_branch(turn):
    dag = build_dag(
        Branch.objects.get(pk=turn.branch_id).conversation, leaf_size=2, max_depth=0, tail=0
    )
    leaf = dag.leaves[0]
    described = tools.execute(name="lcm_describe", input={"id": leaf.id}, turn=turn)
    assert described.is_error is False
    assert json.loads(described.content)["id"] == leaf.id
    expanded = tools.execute(
        name="lcm_expand", input={"summary_id": leaf.id, "include_messages": True}, turn=turn
    )
    assert expanded.is_error is False
    assert FACT in expanded.content
    unknown = tools.execute(name="lcm_expand", input={"summary_id": "sum_0000"}, turn=turn)
    assert unknown.is_error is True
    assert json.loads(unknown.content)["code"] == "not_found"


def test_memory_search_returns_untrusted_artifacts(turn):
    result = tools.execute(name="memory_search", input={"query": "staging deploy code"}, turn=turn)
    assert result.is_error is False
    assert result.content.startswith("<memory_artifact ")
    assert 'trust="untrusted"' in result.content
    assert "BLUE-FALCON-7" in result.content
    empty = tools.execute(name="memory_search", input={"query": "   "}, turn=turn)
    assert empty.is_error is True


def test_pin_fact_pins_on_the_branch(turn):
    result = tools.execute(
        name="pin_fact", input={"text": "Deploys need two reviewers."}, turn=turn
    )
    assert result.is_error is False
    pinned = json.loads(result.content)["pinned"]
    branch = Branch.objects.get(pk=turn.branch_id)
    head = StateCheckpoint.objects.get(pk=branch.head_state_id)
    assert head.pinned_facts[-1]["id"] == pinned["id"]
    assert head.pinned_facts[-1]["text"] == "Deploys need two reviewers."
    empty = tools.execute(name="pin_fact", input={"text": ""}, turn=turn)
    assert empty.is_error is True
    assert (
        StateCheckpoint.objects.get(pk=Branch.objects.get(pk=turn.branch_id).head_state_id) == head
    )


def test_a_registered_tool_joins_the_registry(turn):
    tool = tools.Tool(
        "echo_test",
        "Echo.",
        {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
        lambda data, _turn: data["x"],
    )
    tools.register(tool)
    try:
        assert tools.execute(name="echo_test", input={"x": "hi"}, turn=turn) == ToolResult("hi")
    finally:
        tools._REGISTRY.pop("echo_test")


# Bad input of each kind: refused by the tool's input_schema (jsonschema) before the tool
# runs, so no turn is needed; the message names the field for the model.
BAD_INPUT = [
    ("lcm_grep", {}, "missing required field 'query'"),
    ("lcm_expand_query", {"token_cap": 0}, "missing required field 'prompt'"),
    ("lcm_grep", {"query": 5}, "field 'query' must be of type string"),
    ("lcm_grep", {"query": None}, "field 'query' must be of type string"),
    ("lcm_grep", {"query": "x", "limit": "10"}, "field 'limit' must be of type integer"),
    ("lcm_grep", {"query": "x", "limit": True}, "field 'limit' must be of type integer"),
    ("lcm_grep", {"query": "x", "limit": 10.0}, "field 'limit' must be of type integer"),
    (
        "lcm_grep",
        {"query": "x", "ignore_case": "yes"},
        "field 'ignore_case' must be of type boolean",
    ),
    ("lcm_grep", {"query": "x", "mode": "sql"}, "field 'mode' must be one of full_text, regex"),
    ("memory_search", {"query": "x", "top_k": 0}, "field 'top_k' must be at least 1"),
    ("memory_search", {"query": "x", "top_k": 21}, "field 'top_k' must be at most 20"),
    (
        "lcm_expand_query",
        {"prompt": "?", "summary_ids": "sum_1"},
        "field 'summary_ids' must be of type array",
    ),
    (
        "lcm_expand_query",
        {"prompt": "?", "summary_ids": ["sum_1", 2]},
        "field 'summary_ids[1]' must be of type string",
    ),
    # several problems: a missing field first, then the fields in the order given
    ("lcm_grep", {"limit": "x"}, "missing required field 'query'"),
    (
        "lcm_grep",
        {"query": "x", "sort": "size", "mode": "sql"},
        "field 'sort' must be one of recency, relevance",
    ),
]


@pytest.mark.parametrize(("name", "data", "message"), BAD_INPUT)
def test_bad_input_of_each_kind_is_an_error_naming_the_field(name, data, message):
    assert tools.execute(name=name, input=data, turn=None) == ToolResult(message, is_error=True)


def test_a_wrapped_tools_error_result_reaches_the_model_unchanged(turn):
    # lcm_expand_query's own check (retrieval), not the schema: its error JSON, byte for byte
    result = tools.execute(name="lcm_expand_query", input={"prompt": "why?"}, turn=turn)
    assert result == ToolResult(
        '{"code": "invalid", "message": "give summary_ids or a query to find them", '
        '"extra": {"field": "summary_ids"}}',
        is_error=True,
    )


def test_long_text_is_cut_and_blocks_and_errors_pass_as_they_are(settings):
    settings.LCM_TOOL_MAX_RESULT_CHARS = 10
    blocks = [{"type": "text", "text": "x" * 50, "annotations": []}]
    schema = {"type": "object", "properties": {}}
    for name, content in (
        ("long_text_test", "y" * 25),
        ("blocks_test", blocks),
        ("error_test", ToolResult.error("z" * 25)),
    ):
        tools.register(tools.Tool(name, "Test.", schema, lambda _data, _turn, c=content: c))
    try:
        cut = tools.execute(name="long_text_test", input={}, turn=None)
        assert cut == ToolResult("y" * 10 + "\n[cut: 15 more characters; narrow the request]")
        assert tools.execute(name="blocks_test", input={}, turn=None) == ToolResult(blocks)
        assert tools.execute(name="error_test", input={}, turn=None) == ToolResult.error("z" * 25)
    finally:
        for name in ("long_text_test", "blocks_test", "error_test"):
            tools._REGISTRY.pop(name)
