"""Concurrent requests on one conversation key: one thread, each message stored once, no
refusal (a request that loses the race to create the key continues the winner's thread).
Meaningful on PostgreSQL (real concurrent writers); SQLite serializes them."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from conversations.models import Conversation, Message
from dropin.models import Thread
from tests.support.fake_chat_completions_api import chat_completion
from tests.support.fake_responses_api import responses_object

CLIENTS = 8


def test_concurrent_first_uses_of_a_key_make_one_conversation(upstreams, live_server, caller):
    # The upstream answers once every request has reached it: all of them planned against
    # the same (answerless) history. Without it a request that finished before another one
    # planned would make that one a regeneration of its answer, which forks by design.
    all_arrived = threading.Barrier(CLIENTS, timeout=60)

    def answer(_request):
        all_arrived.wait()
        return chat_completion("ok")

    upstreams.chat.enqueue(*[answer for _ in range(CLIENTS)])
    body = {"model": "local", "messages": [{"role": "user", "content": "same start"}]}
    headers = {"Authorization": f"Bearer {caller[1]}", "X-LCM-Conversation": "shared"}

    def send(_):
        return httpx.post(
            live_server.url + "/openai/v1/chat/completions", json=body, headers=headers, timeout=60
        )

    with ThreadPoolExecutor(CLIENTS) as pool:
        responses = list(pool.map(send, range(CLIENTS)))
    assert [r.status_code for r in responses] == [200] * CLIENTS
    assert {r.headers["x-lcm-conversation-id"] for r in responses} == {
        str(Thread.objects.get().conversation_id)
    }
    assert Conversation.objects.count() == 1
    assert Message.objects.filter(role="user").count() == 1
    # The answers are identical, so their ids are too: stored once.
    assert Message.objects.filter(role="assistant").count() == 1


def test_concurrent_codex_requests_of_one_session_store_its_history_once(
    upstreams, live_server, caller
):
    """Several Responses requests of one session (its prompt_cache_key names it), each with
    the history and a tool round, at once: one conversation, every item once."""
    all_arrived = threading.Barrier(CLIENTS, timeout=60)

    def answer(_request):
        all_arrived.wait()
        return responses_object("done")

    upstreams.responses.enqueue(*[answer for _ in range(CLIENTS)])
    history = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "list files"},
        {"type": "reasoning", "summary": [], "encrypted_content": "enc=="},
        {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
    ]
    body = {"model": "gpt", "input": history, "store": False, "prompt_cache_key": "s-1"}

    def send(_):
        return httpx.post(
            live_server.url + "/openai/v1/responses",
            json=body,
            headers={"Authorization": f"Bearer {caller[1]}"},
            timeout=60,
        )

    with ThreadPoolExecutor(CLIENTS) as pool:
        responses = list(pool.map(send, range(CLIENTS)))
    assert [r.status_code for r in responses] == [200] * CLIENTS
    assert Conversation.objects.count() == 1
    roles = list(Message.objects.order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "assistant", "tool", "assistant"]
