"""Receipts of the drop-in wires (docs/receipts.md): the official SDKs call the real server,
whose upstreams are the recording fakes; every body they received replays byte for byte,
and the diff of two consecutive calls across a compaction names the summary that replaced
the dropped messages and the item where the cached prefix changed."""

from __future__ import annotations

import pytest

from receipts.diff import receipt_diff
from receipts.models import Receipt
from receipts.selectors import receipt_detail, replay
from tests.support.fake_chat_completions_api import chat_completion, chat_text_stream
from tests.support.fake_messages_api import anthropic_text_stream, message

pytestmark = pytest.mark.django_db(transaction=True)


def _replays(received: list[bytes], receipts: list[Receipt]) -> None:
    assert len(received) == len(receipts)
    for body, receipt in zip(received, receipts, strict=True):
        rebuilt = replay(receipt)
        assert rebuilt.body == body and rebuilt.exact


def test_both_wires_stream_or_not_replay_byte_for_byte(upstreams, oai, claude):
    upstreams.messages.enqueue(
        message("First answer."), anthropic_text_stream("Second answer, streamed.")
    )
    history = [{"role": "user", "content": "Tell me about the harbour of Lisbon in the 1750s."}]
    first = claude.messages.create(
        model="claude", messages=history, max_tokens=300, system="Be brief."
    )
    history += [
        {"role": "assistant", "content": first.content[0].text},
        {"role": "user", "content": "And what happened to the harbour after the earthquake?"},
    ]
    with claude.messages.stream(
        model="claude", messages=history, max_tokens=300, system="Be brief."
    ) as stream:
        stream.get_final_message()
    upstreams.chat.enqueue(
        chat_completion("Chat answer one: the galleys left for Lisbon."),
        chat_text_stream("Chat answer two."),
    )
    chat = [{"role": "user", "content": "Which ships left the port of Genoa every spring?"}]
    oai.chat.completions.create(model="local", messages=chat, max_tokens=200)
    chat += [
        {"role": "assistant", "content": "Chat answer one: the galleys left for Lisbon."},
        {"role": "user", "content": "And which of them came back before the autumn storms?"},
    ]
    for _chunk in oai.chat.completions.create(
        model="local", messages=chat, max_tokens=200, stream=True
    ):
        pass
    receipts = list(Receipt.objects.filter(site="dropin").order_by("id"))
    _replays(
        [r.raw for r in upstreams.messages.requests], [r for r in receipts if r.wire == "anthropic"]
    )
    _replays(
        [r.raw for r in upstreams.chat.requests], [r for r in receipts if r.wire == "openai_chat"]
    )
    last = receipt_detail(receipts[-1])
    assert [i["reason"] for i in last["items"]] == ["input"] * 3
    assert all(i["in_body"] for i in last["items"])
    assert last["notes"] == {"wire": "openai", "compacted": False}


LIMIT = 2600


def _question(i: int) -> str:
    return (
        f"Turn {i}: "
        + "tell me one more thing about the history of bridges, sailing and maps. " * 4
    )


def test_a_diff_across_a_compaction_names_the_summary_and_the_cache_break(
    upstreams, oai, settings, monkeypatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # compaction summarizes offline (deterministic)
    monkeypatch.setenv("LCM_MODEL_LOCAL_CONTEXT_LIMIT", str(LIMIT))
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "sync": True}
    history: list[dict] = []
    crossed = None
    for i in range(40):
        upstreams.chat.enqueue(
            chat_completion(f"Answer {i}: bridges were built of stone and wood.")
        )
        history.append({"role": "user", "content": _question(i)})
        reply = oai.chat.completions.create(model="local", messages=history, max_tokens=300)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
        receipts = list(Receipt.objects.filter(site="dropin").order_by("id"))
        items = receipt_detail(receipts[-1])["items"]
        if any(item["kind"] == "summary" for item in items):
            crossed = receipts[-2], receipts[-1]
            break
    assert crossed is not None, "no compaction within 40 turns"
    _replays(
        [r.raw for r in upstreams.chat.requests],
        list(Receipt.objects.filter(site="dropin").order_by("id")),
    )
    before, after = crossed
    diff = receipt_diff(after, before)
    assert diff["summarized"], diff
    summary_ids = {i["id"] for i in receipt_detail(after)["items"] if i["kind"] == "summary"}
    replaced = diff["summarized"][0]
    assert replaced["summary_id"] in summary_ids and replaced["message_ids"]
    assert replaced["summary_text"]
    assert diff["cache"]["changed"] is True
    # the prefix broke where the first summary (or the first changed item) stands
    item = diff["cache"]["item"]
    assert item is not None and item["index"] is not None
    detail = receipt_detail(after)
    assert detail["left_out"], "the messages the summary stands for are left out"
