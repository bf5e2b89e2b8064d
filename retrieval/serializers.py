"""Request parsing and response shapes of the retrieval API (uniquely named for the
OpenAPI schema). Requests are validated here; the services re-check their own rules."""

from __future__ import annotations

from rest_framework import serializers

from core.api.requests import BLANK_PATTERN, RequestSerializer
from core.api.schema import ItemIdField
from retrieval.grep import MAX_LIMIT, MAX_QUERY_CHARS
from retrieval.grep_origin import MAX_AGENT_CHARS, MAX_PROJECT_CHARS
from retrieval.selectors import MAX_EXPAND_DEPTH
from retrieval.tool_definitions import TOOL_DEFINITIONS

# ---------------------------------------------------------------------------------------
# describe


class DescribeRefSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    depth = serializers.IntegerField()
    token_count = serializers.IntegerField()


class DescribeDepthCountSerializer(serializers.Serializer):
    depth = serializers.IntegerField()
    count = serializers.IntegerField()
    tokens = serializers.IntegerField()


class DescribeManifestSerializer(serializers.Serializer):
    summaries_by_depth = DescribeDepthCountSerializer(many=True)
    summary_count = serializers.IntegerField()
    summary_tokens = serializers.IntegerField()
    message_count = serializers.IntegerField()
    message_tokens = serializers.IntegerField()
    source_seq_range = serializers.ListField(
        child=serializers.IntegerField(), allow_null=True, min_length=2, max_length=2
    )


class DescribeFidelitySerializer(serializers.Serializer):
    score = serializers.FloatField(
        allow_null=True,
        help_text="Share of the sources' handles the summary names (null: the sources had none).",
    )
    handle_count = serializers.IntegerField()
    kept = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="Per handle kind (file, command, error, ident, url, number, decision): "
        "[named, total].",
    )
    dropped = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Per handle kind: the handles the summary does not name.",
    )
    path = serializers.CharField(
        help_text="How the text was made: deterministic, model, model_retried, model_appended, "
        "model_retried_appended, model_replaced, fallback, or agent (an agent's own compaction, imported)."
    )
    measure_ms = serializers.FloatField()


class DescribeSummarySerializer(serializers.Serializer):
    type = serializers.CharField(help_text='"summary"')
    id = serializers.CharField()
    conversation_id = serializers.IntegerField()
    kind = serializers.CharField()
    depth = serializers.IntegerField()
    level = serializers.CharField(help_text="normal, aggressive or fallback")
    created_at = serializers.DateTimeField()
    token_count = serializers.IntegerField()
    content = serializers.CharField()
    earliest_at = serializers.DateTimeField()
    latest_at = serializers.DateTimeField()
    source_seq_range = serializers.ListField(child=serializers.IntegerField(), allow_null=True)
    descendant_count = serializers.IntegerField()
    descendant_token_count = serializers.IntegerField()
    file_ids = serializers.ListField(child=serializers.CharField())
    parents = DescribeRefSerializer(
        many=True, help_text="The summaries this one was condensed from (one depth below)."
    )
    children = DescribeRefSerializer(
        many=True, help_text="The summaries that were condensed from this one."
    )
    manifest = DescribeManifestSerializer()
    fidelity = DescribeFidelitySerializer(
        allow_null=True,
        help_text="What the summary keeps of its sources' handles (docs/compaction.md); null "
        "when it was not measured (written before, or imported).",
    )


class DescribeMessageRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    role = serializers.CharField()


class DescribeSummaryRefSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    depth = serializers.IntegerField()


class DescribeFileSerializer(serializers.Serializer):
    type = serializers.CharField(help_text='"file"')
    id = serializers.CharField()
    conversation_id = serializers.IntegerField()
    file_name = serializers.CharField()
    mime_type = serializers.CharField()
    byte_size = serializers.IntegerField()
    line_count = serializers.IntegerField()
    token_count = serializers.IntegerField()
    sha256 = serializers.CharField()
    tool_name = serializers.CharField()
    created_at = serializers.DateTimeField()
    exploration_summary = serializers.CharField()
    referenced_by_messages = DescribeMessageRefSerializer(many=True)
    referenced_by_summaries = DescribeSummaryRefSerializer(many=True)


class DescribeToolOutputSerializer(serializers.Serializer):
    type = serializers.CharField(help_text='"tool_output"')
    id = serializers.CharField(help_text="out_<message id>_<part ordinal>")
    conversation_id = serializers.IntegerField()
    message_seq = serializers.IntegerField()
    role = serializers.CharField()
    tool_name = serializers.CharField(allow_null=True)
    tool_call_id = serializers.CharField(allow_null=True)
    is_error = serializers.BooleanField()
    content = serializers.CharField(help_text="The whole output (or error) as stored.")


# ---------------------------------------------------------------------------------------
# grep


class GrepQuerySerializer(RequestSerializer):
    query = serializers.CharField(max_length=MAX_QUERY_CHARS, trim_whitespace=False)
    # The enum is named GrepModeEnum in the schema (SPECTACULAR_SETTINGS).
    mode = serializers.ChoiceField(
        choices=["full_text", "regex", "semantic", "hybrid"],
        default="full_text",
        help_text="full_text, regex, semantic (chunks and/or summaries by meaning, per "
        "scope) or hybrid (those fused with full-text message/summary hits); see "
        "docs/memory.md",
    )
    scope = serializers.ChoiceField(
        choices=["messages", "summaries", "both", "files"],
        default="both",
        help_text="files: the stored content of large files (bounded scan, one hit per file)",
    )
    conversation_id = serializers.IntegerField(required=False, allow_null=True, default=None)
    since = serializers.DateTimeField(required=False, allow_null=True, default=None)
    before = serializers.DateTimeField(required=False, allow_null=True, default=None)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=50)
    sort = serializers.ChoiceField(choices=["recency", "relevance"], default="recency")
    ignore_case = serializers.BooleanField(
        default=False, help_text="regex only (full text is always case-insensitive)"
    )
    include_archived = serializers.BooleanField(
        default=False,
        help_text="Also scan the archive segments in scope (messages whose content retention "
        "moved out of the database; bounded, see docs/retention.md). Their hits say "
        "from_archive.",
    )
    agent = serializers.CharField(
        max_length=MAX_AGENT_CHARS,
        required=False,
        allow_null=True,
        default=None,
        help_text="Only conversations this coding agent wrote (claude-code, codex, opencode, "
        "gemini; see each hit's origin.agent and GET /api/v1/imports/sessions/).",
    )
    project = serializers.CharField(
        max_length=MAX_PROJECT_CHARS,
        required=False,
        allow_null=True,
        default=None,
        trim_whitespace=False,
        help_text="Only conversations whose agent ran in this project directory or below it "
        "(whole path components: /work/api matches /work/api/web, not /work/api2).",
    )

    # The query keeps its spaces (a regex may need them) but must not be blank.
    # Semantic and hybrid modes do not search files.
    schema_rules = {
        "not": {
            "anyOf": [
                {"properties": {"query": {"pattern": BLANK_PATTERN}}},
                {
                    "required": ["mode", "scope"],
                    "properties": {
                        "mode": {"enum": ["semantic", "hybrid"]},
                        "scope": {"enum": ["files"]},
                    },
                },
            ]
        }
    }


class GrepHitOriginSerializer(serializers.Serializer):
    agent = serializers.CharField(help_text="The coding agent that wrote the conversation.")
    agent_version = serializers.CharField(allow_null=True)
    project = serializers.CharField(
        allow_null=True, help_text="The directory the agent ran in (its cwd); null if unknown."
    )
    git_branch = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)
    session_id = serializers.CharField(help_text="The conversation's session id.")
    title = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)


class GrepHitSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["message", "summary", "file", "chunk"])
    id = ItemIdField(
        help_text="A message id (integer), a summary id (sum_...), a file id (file_...) or "
        "a memory chunk id (semantic/hybrid modes; summary hits of those modes are "
        "sum_... ids, which describe and expand accept)."
    )
    conversation_id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    snippet = serializers.CharField(
        help_text=(
            "A window of the matched content with every match marked «like this», whole "
            "(a hyphenated identifier is one mark on both databases). « and » are always "
            "markers: the content's own are shown as ‹ and ›. Render by splitting on the "
            "markers, escaping each piece, and wrapping the marked ones (e.g. in <mark>)."
        )
    )
    score = serializers.FloatField(
        allow_null=True, help_text="Relevance (higher is better) when sort=relevance, else null."
    )
    seq = serializers.IntegerField(required=False)
    covered_by = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Messages: the active-context summary covering it; null if in context.",
    )
    depth = serializers.IntegerField(required=False)
    kind = serializers.CharField(required=False)
    matched = serializers.ChoiceField(
        choices=["any_word"],
        required=False,
        help_text=(
            "full_text only: present (any_word) when no message held every word of the query, "
            "so the results are the messages holding any of them, ranked by BM25 (stems, "
            "stop words out; docs/memory.md)."
        ),
    )
    seq_end = serializers.IntegerField(
        required=False, help_text="Chunks: the last message seq the chunk covers (seq: the first)."
    )
    chunk_type = serializers.CharField(required=False, help_text="Chunks: code, decision, ...")
    file_name = serializers.CharField(required=False)
    line = serializers.IntegerField(required=False, help_text="Files: the first matching line.")
    from_archive = serializers.BooleanField(
        required=False, help_text="A message hit scanned from an archive segment."
    )
    origin = GrepHitOriginSerializer(
        allow_null=True,
        help_text="Where the hit comes from: the coding agent, project, session and times of "
        "its conversation (created_at is the hit's own time); null for a conversation no "
        "coding agent wrote.",
    )
    # The passage of a semantic/hybrid chunk row (memory.grep.add_passages, docs/memory.md).
    text = serializers.CharField(
        required=False,
        help_text="Chunks (semantic/hybrid): the passage to read, the matched unit with its "
        "neighbours in the same message, at most LCM_SEARCH_PASSAGE_TOKENS tokens (the "
        "unit alone if larger). Unmarked, whitespace kept.",
    )
    message_id = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="Chunks (semantic/hybrid): the message the passage is from (describe or "
        "expand reach the whole); null for a unit over several messages.",
    )
    start_offset = serializers.IntegerField(
        required=False,
        help_text="Chunks (semantic/hybrid): the passage's first character in its message's text.",
    )
    end_offset = serializers.IntegerField(
        required=False,
        help_text="Chunks (semantic/hybrid): just past the passage's last "
        "character in its message's text.",
    )


class GrepResponseSerializer(serializers.Serializer):
    results = GrepHitSerializer(many=True)


# ---------------------------------------------------------------------------------------
# expand


class ExpandInputSerializer(RequestSerializer):
    summary_id = serializers.CharField(max_length=64)
    depth = serializers.IntegerField(min_value=1, max_value=MAX_EXPAND_DEPTH, default=1)
    include_messages = serializers.BooleanField(default=False)
    token_cap = serializers.IntegerField(
        min_value=1, max_value=10_000_000, required=False, allow_null=True, default=None
    )
    grant_id = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Expand inside a delegation grant: depth and token cap are clamped to it.",
    )


class ExpandSummaryItemSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    depth = serializers.IntegerField()
    level = serializers.IntegerField(help_text="Edges below the expanded summary.")
    token_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    content = serializers.CharField()


class ExpandMessageItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    token_count = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    content = serializers.CharField()
    from_archive = serializers.BooleanField(
        help_text="The content was read back from an archive segment (docs/retention.md)."
    )


class ExpandResponseSerializer(serializers.Serializer):
    summary_id = serializers.CharField()
    depth = serializers.IntegerField()
    summaries = ExpandSummaryItemSerializer(many=True)
    messages = ExpandMessageItemSerializer(many=True)
    token_estimate = serializers.IntegerField()
    token_cap = serializers.IntegerField()
    truncated = serializers.BooleanField()
    omitted_ids = serializers.ListField(
        child=ItemIdField(),
        help_text=(
            "What to expand next to read what the cap cut: summary ids (a cut summary, or a "
            "leaf none of whose messages fit) and message ids of a leaf cut part way."
        ),
    )
    omitted_message_count = serializers.IntegerField(
        help_text="Source messages left out by the cap."
    )


# ---------------------------------------------------------------------------------------
# expansions


class ExpansionInputSerializer(RequestSerializer):
    prompt = serializers.CharField(max_length=20_000)
    summary_ids = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, allow_null=True, max_length=50
    )
    query = serializers.CharField(
        max_length=MAX_QUERY_CHARS, required=False, allow_null=True, trim_whitespace=False
    )
    conversation_id = serializers.IntegerField(required=False, allow_null=True, default=None)
    max_answer_tokens = serializers.IntegerField(
        min_value=50, max_value=32_000, required=False, allow_null=True
    )
    token_cap = serializers.IntegerField(
        min_value=1, max_value=1_000_000, required=False, allow_null=True
    )
    max_depth = serializers.IntegerField(
        min_value=1, max_value=MAX_EXPAND_DEPTH, required=False, allow_null=True
    )

    # summary_ids to read, or a query to find them.
    schema_rules = {
        # Refused: no summary_ids together with a blank (or no) query (see MessageInput).
        "not": {
            "properties": {"summary_ids": {"maxItems": 0}, "query": {"pattern": BLANK_PATTERN}}
        },
    }


class ExpansionUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()


class ExpansionResponseSerializer(serializers.Serializer):
    answer = serializers.CharField()
    cited_ids = serializers.ListField(child=serializers.CharField())
    cited_message_ids = serializers.ListField(child=serializers.IntegerField())
    tokens_used = serializers.IntegerField(help_text="Tokens of history read under the grant.")
    mode = serializers.CharField(help_text="model or offline")
    grant_id = serializers.CharField(allow_null=True)
    truncated = serializers.BooleanField()
    tool_calls = serializers.IntegerField(required=False)
    model_usage = ExpansionUsageSerializer(required=False)


# ---------------------------------------------------------------------------------------
# tools


class ToolDefinitionSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    input_schema = serializers.JSONField()


class ToolListResponseSerializer(serializers.Serializer):
    tools = ToolDefinitionSerializer(many=True)


TOOL_NAMES = [tool["name"] for tool in TOOL_DEFINITIONS]


class ToolCallInputSerializer(RequestSerializer):
    name = serializers.ChoiceField(
        choices=TOOL_NAMES,
        error_messages={
            "invalid_choice": f"unknown tool {{input!r}}; known: {', '.join(TOOL_NAMES)}"
        },
    )
    input = serializers.DictField(help_text="The tool's input object (see GET /tools/).")
    conversation_id = serializers.IntegerField()


class ToolCallResponseSerializer(serializers.Serializer):
    content = serializers.CharField(help_text="The tool result text (JSON), for a tool_result.")
    is_error = serializers.BooleanField()
