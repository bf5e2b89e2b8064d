"""The fast paths for plain-text messages give exactly what the general paths give: the same
blocks from parsing, the same chain hashes, the same token estimate."""

from __future__ import annotations

import hashlib
import json

from dropin import services
from dropin.wires import openai_chat as wire_openai
from providers import blocks as b


def _general_identity_data(message: dict) -> str:
    identity = services._identity(message)
    if not any(identity[2:]):
        return f"{identity[0]}\0{identity[1]}"
    return json.dumps(identity, sort_keys=True, ensure_ascii=False)


def _general_chain(system: str, messages: list[dict]) -> list[str]:
    head = hashlib.sha256(b"system\0" + system.encode()).hexdigest()
    hashes = [head]
    for message in messages:
        head = hashlib.sha256((head + _general_identity_data(message)).encode()).hexdigest()
        hashes.append(head)
    return hashes


MESSAGES = [
    {"role": "user", "blocks": [b.text("hello")]},
    {"role": "assistant", "blocks": []},
    {"role": "user", "blocks": [b.text("a"), b.text("b")]},
    {"role": "assistant", "blocks": [b.text("x"), b.tool_use("c1", "look", {"q": 1})]},
    {"role": "user", "blocks": [b.tool_result("c1", "found"), b.text("and?")]},
    {"role": "assistant", "blocks": [{"type": "text"}, b.reasoning(summary="hm")]},
    {"role": "user", "blocks": [b.text(""), b.image("", {"type": "url", "url": "u"})]},
]


def test_chain_and_estimate_match_the_general_path():
    assert services.chain("sys", MESSAGES) == _general_chain("sys", MESSAGES)
    for message in MESSAGES:
        assert services._identity_data(message) == _general_identity_data(message)


def test_plain_messages_parse_as_the_general_path_does():
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": ""},
            {"role": "assistant", "content": "ok", "tool_calls": []},
            {"role": "user", "content": [{"type": "text", "text": "parts"}]},
            {"role": "assistant", "content": "yes", "tool_calls": None},
            {"role": "user", "content": "again"},
        ],
    }
    parsed = wire_openai.parse(body).messages
    general = []
    for index, message in enumerate(body["messages"]):
        where = f"messages[{index}]"
        if message["role"] == "user":
            general.append({"role": "user", "blocks": wire_openai._user_blocks(message, where)})
        else:
            general.append(
                {"role": "assistant", "blocks": wire_openai._assistant_blocks(message, where)}
            )
    assert parsed == general
