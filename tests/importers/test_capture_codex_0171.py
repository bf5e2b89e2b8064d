"""Codex CLI 0.171 rollouts, in the shapes the real 0.171.0 wrote against a local Responses
server (docs/capture.md, "Codex CLI" format notes): `session_meta.base_instructions` as
`{text, provenance}`, `world_state` records (the environment the model is shown, full or
changed keys), and `token_usage_record` lines with each response's usage, the turn's and
the thread's."""

from __future__ import annotations

from conversations.models import ConversationOrigin, Message, MessagePart
from importers.models import ImportedConversation
from importers.services import import_file
from tests.importers.agent_sessions import write_jsonl

SESSION = "01a24dab-2a19-7a73-a4e8-77b70601154c"
TURN = "01a24dab-2b4e-7421-9280-f218808360aa"


def _line(ordinal: int, kind: str, payload: dict) -> dict:
    when = f"2026-12-06T23:23:{13 + ordinal // 10}.{ordinal % 10}00Z"
    return {"timestamp": when, "ordinal": ordinal, "type": kind, "payload": payload}


def _usage(inputs: int, outputs: int) -> dict:
    return {"input_tokens": inputs, "cached_input_tokens": 0, "cache_write_input_tokens": 0,
            "output_tokens": outputs, "reasoning_output_tokens": 0,
            "total_tokens": inputs + outputs}  # fmt: skip


def _usage_record(response: str, usage: dict, turn: dict, thread: dict) -> dict:
    return {"thread_id": SESSION, "turn_id": TURN, "session_id": SESSION, "root_turn_id": TURN,
            "response_id": response, "usage": usage, "turn_token_usage": turn,
            "thread_token_usage": thread}  # fmt: skip


def codex_0171_rollout() -> list[dict]:
    passthrough = {"internal_chat_message_metadata_passthrough": {"turn_id": TURN}}
    environment = {"environments": {"local": {"cwd": "/work/app", "status": "available",
                                              "shell": "bash"}},
                   "current_date": "2026-12-06", "timezone": "Etc/UTC"}  # fmt: skip
    return [
        _line(
            0,
            "session_meta",
            {
                "session_id": SESSION,
                "id": SESSION,
                "timestamp": "2026-12-06T23:23:12.807Z",
                "cwd": "/work/app",
                "originator": "codex_exec",
                "cli_version": "0.171.0",
                "source": "exec",
                "model_provider": "openai",
                "history_mode": "paginated",
                "base_instructions": {
                    "text": "You are a coding agent running in the Codex CLI.",
                    "provenance": {"kind": "model_default"},
                },
            },
        ),  # fmt: skip
        _line(
            1,
            "event_msg",
            {"type": "task_started", "turn_id": TURN, "model_context_window": 258400},
        ),  # fmt: skip
        _line(
            2,
            "world_state",
            {"full": True, "state": {"model": "gpt-5.4", "environments": environment}},
        ),  # fmt: skip
        _line(3, "turn_context", {"turn_id": TURN, "cwd": "/work/app", "model": "gpt-5.4"}),
        _line(
            4,
            "response_item",
            {
                "type": "message",
                "id": "msg_1",
                "role": "user",
                "content": [{"type": "input_text", "text": "say hello"}],
                **passthrough,
            },
        ),  # fmt: skip
        _line(
            5,
            "response_item",
            {
                "type": "function_call",
                "status": "completed",
                "id": "fc_1",
                "name": "exec_command",
                "arguments": '{"cmd": "echo hello"}',
                "call_id": "call_1",
                **passthrough,
            },
        ),  # fmt: skip
        _line(
            6,
            "token_usage_record",
            _usage_record("resp_1", _usage(100, 20), _usage(100, 20), _usage(100, 20)),
        ),  # fmt: skip
        _line(
            7,
            "response_item",
            {
                "type": "function_call_output",
                "id": "fco_1",
                "call_id": "call_1",
                "output": "hello\n",
                **passthrough,
            },
        ),  # fmt: skip
        _line(
            8,
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": _usage(100, 20), "last_token_usage": _usage(100, 20)},
            },
        ),  # fmt: skip
        _line(9, "world_state", {"full": False, "state": {"current_date": "2026-12-07"}}),
        _line(
            10,
            "response_item",
            {
                "type": "message",
                "status": "completed",
                "id": "msg_2",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "Done: it printed hello.", "annotations": []}
                ],
                **passthrough,
            },
        ),  # fmt: skip
        _line(
            11,
            "token_usage_record",
            _usage_record("resp_2", _usage(130, 9), _usage(230, 29), _usage(230, 29)),
        ),  # fmt: skip
        _line(
            12,
            "event_msg",
            {
                "type": "token_count",
                "info": {"total_token_usage": _usage(230, 29), "last_token_usage": _usage(130, 9)},
            },
        ),  # fmt: skip
        _line(13, "event_msg", {"type": "task_complete", "turn_id": TURN}),
    ]


def _import(tmp_path, user):
    path = write_jsonl(tmp_path / f"rollout-2026-12-06T23-23-12-{SESSION}.jsonl",
                       codex_0171_rollout())  # fmt: skip
    return import_file(format="codex", path=path, owner=user)


def test_base_instructions_of_0171_are_the_system_message(tmp_path, user):
    _import(tmp_path, user)
    first = Message.objects.filter(conversation__session_id=SESSION).order_by("seq").first()
    assert first.role == "system"
    assert first.parts.get().text_content == "You are a coding agent running in the Codex CLI."
    assert first.parts.get().metadata["provenance"] == {"kind": "model_default"}
    row = ImportedConversation.objects.get(conversation__session_id=SESSION)
    assert "base_instructions" not in row.metadata["session_meta"]  # stored once, as the message
    assert (
        ConversationOrigin.objects.get(conversation__session_id=SESSION).agent_version == "0.171.0"
    )


def test_token_usage_records_are_stored_per_response_and_per_turn(tmp_path, user):
    report = _import(tmp_path, user)
    skipped = report.notes.get("skipped_records", {})
    assert "token_usage_record" not in skipped and "world_state" not in skipped
    parts = MessagePart.objects.filter(message__conversation__session_id=SESSION)
    call = parts.get(tool_call_id="call_1", message__role="assistant")
    assert call.metadata["usage"]["total_tokens"] == 120
    assert call.metadata["response_id"] == "resp_1" and call.metadata["turn_id"] == TURN
    answer = parts.get(text_content="Done: it printed hello.")
    assert (answer.metadata["usage"]["input_tokens"], answer.metadata["response_id"]) == (
        130,
        "resp_2",
    )
    meta = ImportedConversation.objects.get(conversation__session_id=SESSION).metadata
    assert meta["turn_token_usage"] == {TURN: _usage(230, 29)}
    assert meta["token_usage"] == _usage(230, 29)


def test_world_state_is_kept_with_its_changes_applied(tmp_path, user):
    _import(tmp_path, user)
    meta = ImportedConversation.objects.get(conversation__session_id=SESSION).metadata
    state = meta["world_state"]
    assert state["model"] == "gpt-5.4" and state["current_date"] == "2026-12-07"
    assert state["environments"]["environments"]["local"]["cwd"] == "/work/app"
    assert meta["world_state_records"] == 2
