"""The drop-in's memory_search runs the search of memory.recall (grep's ranking, no
threshold) over the request's conversation, as untrusted artifacts with their dates."""

import datetime as dt

import pytest

from conversations.inputs import MessageInput
from conversations.services import messages_append
from core.tool_result import ToolResult
from dropin import tools
from memory.indexing import index_conversation_messages

pytestmark = pytest.mark.django_db

WHEN = dt.datetime(2024, 2, 3, 4, 5, 6, tzinfo=dt.UTC)


@pytest.fixture
def remembered(conversation):
    messages_append(
        conversation_id=conversation.pk,
        messages=[
            MessageInput(
                role="user",
                content="Note for later: the spare key is under the blue flower pot.",
                created_at=WHEN,
            ),
            MessageInput(
                role="assistant",
                content="Noted, the weather is mild today.",
                created_at=WHEN + dt.timedelta(minutes=1),
            ),
        ],
    )
    index_conversation_messages(conversation_id=conversation.pk)
    return conversation


def test_memory_search_returns_dated_untrusted_artifacts(user, remembered):
    result = tools.execute(
        user=user,
        conversation_id=remembered.pk,
        name="memory_search",
        input={"query": "Where is the spare key?", "top_k": 1},
    )
    assert result.is_error is False
    content = result.content
    assert content.count("<memory_artifact ") == 1
    header = content.splitlines()[0]
    assert 'trust="untrusted"' in header
    assert f'recorded_at="{WHEN.isoformat()}"' in header
    assert "blue flower pot" in content


def test_memory_search_applies_no_similarity_threshold(user, remembered, settings):
    # a turn's threshold would drop everything here; search returns the nearest units
    settings.LCM_RETRIEVAL_SIMILARITY_THRESHOLD = 2.0
    result = tools.execute(
        user=user,
        conversation_id=remembered.pk,
        name="memory_search",
        input={"query": "volcanic eruptions in Iceland", "top_k": 5},
    )
    assert result.is_error is False
    assert result.content.count("<memory_artifact ") == 2


def test_memory_search_refuses_another_users_conversation(other_user, remembered):
    result = tools.execute(
        user=other_user,
        conversation_id=remembered.pk,
        name="memory_search",
        input={"query": "spare key"},
    )
    assert result.is_error is True
    assert "blue flower pot" not in result.content


def test_drop_in_tool_errors_are_results_for_the_model(user, remembered):
    def call(name, data):
        return tools.execute(user=user, conversation_id=remembered.pk, name=name, input=data)

    assert call("lcm_grep", ["x"]) == ToolResult.error("tool input must be a JSON object")
    # the retrieval tool's own error JSON, byte for byte
    assert call("lcm_expand", {"summary_id": 7}) == ToolResult(
        '{"code": "invalid", "message": "summary_id must be a non-empty string", '
        '"extra": {"field": "summary_id"}}',
        is_error=True,
    )
    # a tool the drop-in does not route is a failure the model reads, not an exception
    unknown = call("lcm_nope", {})
    assert unknown.is_error is True
    assert unknown.content.startswith("lcm_nope failed: InvalidInput: unknown tool 'lcm_nope'")
