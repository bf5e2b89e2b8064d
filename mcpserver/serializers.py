"""The hooks' API bodies (mcpserver/apis.py)."""

from __future__ import annotations

from rest_framework import serializers

from core.api.requests import RequestSerializer
from mcpserver.hooks.client import SERVER_NAME
from mcpserver.hooks.session_start import DEFAULT_PINS_TOKEN_CAP

MAX_PINS_TOKEN_CAP = 20_000


class SessionStartInputSerializer(RequestSerializer):
    hook_input = serializers.DictField(
        required=False, default=dict, help_text="Claude Code's hook input, as it gave it."
    )
    server_name = serializers.RegexField(
        r"^[A-Za-z0-9_.-]{1,64}$", required=False, default=SERVER_NAME,
        help_text="The MCP server's name in the agent's config.",
    )  # fmt: skip
    pins_token_cap = serializers.IntegerField(
        required=False, default=DEFAULT_PINS_TOKEN_CAP, min_value=0, max_value=MAX_PINS_TOKEN_CAP,
        help_text="Pinned facts are added up to this many tokens (0: none).",
    )  # fmt: skip


class HookSpecificOutputSerializer(serializers.Serializer):
    hookEventName = serializers.CharField()  # noqa: N815 - Claude Code's field name
    additionalContext = serializers.CharField()  # noqa: N815


class SessionStartAnswerSerializer(serializers.Serializer):
    hookSpecificOutput = HookSpecificOutputSerializer()  # noqa: N815
