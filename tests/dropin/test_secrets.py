"""Secrets at ingest on the drop-in wires: a key pasted into a chat is masked before the
conversation stores it, the upstream sees it redacted (the same detector), and the client
resending its history (key and all) still continues the same conversation."""

from __future__ import annotations

from conversations.models import Message, SecretFinding
from tests.conversations.secret_shapes import SHAPES, shape_text
from tests.support.fake_chat_completions_api import chat_completion


def test_a_pasted_key_is_masked_in_the_store_and_the_history_still_continues(upstreams, oai):
    pasted = "my key is " + shape_text("stripe_key") + " and " + shape_text("jwt")
    upstreams.chat.enqueue(chat_completion("noted"), chat_completion("done"))
    history = [{"role": "user", "content": pasted}]
    first = oai.chat.completions.with_raw_response.create(model="local", messages=history)
    history += [{"role": "assistant", "content": "noted"}, {"role": "user", "content": "thanks"}]
    second = oai.chat.completions.with_raw_response.create(model="local", messages=history)
    conversation_id = int(first.headers["x-lcm-conversation-id"])
    assert int(second.headers["x-lcm-conversation-id"]) == conversation_id
    stored = list(
        Message.objects.filter(conversation_id=conversation_id)
        .order_by("seq")
        .values_list("content", flat=True)
    )
    masked = (
        "my key is stripe.api_key = '[secret:stripe_key]' and session cookie [secret:jwt] expired"
    )
    assert stored == [masked, "noted", "thanks", "done"]
    found = sorted(SecretFinding.objects.values_list("message__seq", "kind", "location"))
    assert found == [  # the message's content and its text part, the first message only
        (1, "jwt", "content"),
        (1, "jwt", "parts[0].text_content"),
        (1, "stripe_key", "content"),
        (1, "stripe_key", "parts[0].text_content"),
    ]
    sent = "\n".join(r.raw.decode() for r in upstreams.chat.requests)
    for kind in ("stripe_key", "jwt"):
        assert SHAPES[kind][1] not in sent
        assert f"[REDACTED:{kind}]" in sent
