"""The hooks' API: `POST /api/v1/hooks/session-start/` answers Claude Code's SessionStart
hook for the token's user (the remote hook client prints the answer as it is; docs/capture.md,
"Claude Code hooks")."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.schema import WRITE_ERRORS
from mcpserver.hooks.session_start import session_start_answer
from mcpserver.serializers import SessionStartAnswerSerializer, SessionStartInputSerializer


class SessionStartHookApi(APIView):
    @extend_schema(
        operation_id="hooks_session_start",
        request=SessionStartInputSerializer,
        responses={200: SessionStartAnswerSerializer, **WRITE_ERRORS},
        description=(
            "Claude Code's SessionStart answer for the authenticated user: a note that past "
            "sessions are searchable through the MCP tools, with the user's pinned facts "
            "within `pins_token_cap` tokens. The answer is Claude Code's hook JSON, printed by "
            "the hook as it is; new keys may be added to it."
        ),
    )
    def post(self, request):
        body = SessionStartInputSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        answer = session_start_answer(
            user=request.user,
            hook_input=body.validated_data["hook_input"],
            server_name=body.validated_data["server_name"],
            token_cap=body.validated_data["pins_token_cap"],
        )
        return Response(answer)
