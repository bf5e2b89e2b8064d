"""Every OpenAI Responses item type <-> our blocks, one item at a time.

Used both ways round: for the `output` of an upstream answer (providers/openai_wire.py) and
for the `input` a Responses client sends (the drop-in's Responses wire), so a call the
client sends back is the very block its answer was stored as (the drop-in finds a resent
history by these blocks).

- `message`: user/system/developer `input_text`, `input_image` and `input_file` parts,
  assistant `output_text` and `refusal` parts -> text, image and (kept whole) unknown blocks;
- `function_call` -> tool_use (arguments parsed as JSON); `custom_tool_call` (a freeform
  tool such as Codex's apply_patch) -> tool_use whose input is `{"input": text}`;
  `local_shell_call` -> tool_use `local_shell` whose input is its `action`;
- `*_call_output` -> tool_result with the output's text;
- `reasoning` -> a reasoning block holding the item (its `encrypted_content` goes back
  byte-exact); `web_search_call`, `compaction` and the other server-side or opaque items
  -> an unknown block holding the item.

Every block made from an item that is not plain keeps the item itself (`raw_item`), so it
can be sent again exactly as it came.
"""

from __future__ import annotations

import json

from providers import blocks as b

PROVIDER = "openai"
LOCAL_SHELL = "local_shell"

CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "local_shell_call_output": "local_shell_call",
}
# Items of the model's turn kept whole: server-side tool calls and opaque state.
OPAQUE_ASSISTANT = (
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "tool_search_call",
    "compaction",
)
OPAQUE_USER = ("computer_call_output", "mcp_approval_response", "tool_search_output")


def parse_arguments(arguments: str) -> dict:
    try:
        value = json.loads(arguments) if arguments and arguments.strip() else {}
    except json.JSONDecodeError:
        return {"_unparsed_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def call_block(item: dict) -> dict:
    """The tool_use of a function, custom or local shell call."""
    kind = item.get("type")
    call_id = item.get("call_id") or item.get("id") or ""
    if kind == "custom_tool_call":
        block = b.tool_use(call_id, item.get("name", ""), {"input": item.get("input", "")})
    elif kind == "local_shell_call":
        block = b.tool_use(call_id, LOCAL_SHELL, item.get("action") or {})
    else:
        block = b.tool_use(
            call_id, item.get("name", ""), parse_arguments(item.get("arguments", ""))
        )
    if kind != "function_call" or item.get("namespace"):
        block["raw_item"] = item
    return block


def output_text(output) -> str:
    """The text of a call's output: a string, or a list of content parts."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    if output is None:
        return ""
    return json.dumps(output)


def output_block(item: dict) -> dict:
    """The tool_result of a call's output item."""
    block = b.tool_result(item.get("call_id", ""), output_text(item.get("output")))
    if item.get("type") != "function_call_output" or not isinstance(item.get("output"), str):
        block["raw_item"] = item
    return block


def reasoning_block(item: dict) -> dict:
    summary = "\n".join(
        part.get("text", "") for part in item.get("summary") or [] if isinstance(part, dict)
    )
    return b.reasoning(item.get("encrypted_content"), summary or None, item)


def content_block(part: dict) -> dict:
    """One content part of a message."""
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return b.text(str(part.get("text", "")), part.get("annotations") or [])
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        url = part["image_url"]
        if url.startswith("data:") and ";base64," in url:
            head, data = url[5:].split(";base64,", 1)
            return b.image(head, {"type": "base64", "media_type": head, "data": data})
        return b.image("", {"type": "url", "url": url})
    return b.unknown(PROVIDER, part)  # refusals, files, images by file id: kept whole


def item_blocks(item: dict) -> tuple[str, list[dict]]:
    """(the role whose turn the item belongs to, its blocks) for any non-message item."""
    kind = item.get("type")
    if kind in CALLS:
        return "assistant", [call_block(item)]
    if kind in OUTPUTS:
        return "user", [output_block(item)]
    if kind == "reasoning":
        return "assistant", [reasoning_block(item)]
    if kind in OPAQUE_USER:
        return "user", [b.unknown(PROVIDER, item)]
    return "assistant", [b.unknown(PROVIDER, item)]


def output_items(blocks: list[dict]) -> list[dict]:
    """Our assistant blocks as Responses output items, those that came as items exactly as
    they came (for answers translated from another wire, and replayed ones)."""
    items: list[dict] = []
    texts: list[dict] = []

    def flush() -> None:
        if texts:
            items.append({"type": "message", "role": "assistant", "content": list(texts)})
            texts.clear()

    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                texts.append({"type": "output_text", "text": block["text"], "annotations": []})
            continue
        flush()
        if block.get("raw_item"):
            items.append(block["raw_item"])
        elif kind == "tool_use":
            items.append(
                {
                    "type": "function_call",
                    "call_id": block["id"],
                    "name": block["name"],
                    "arguments": json.dumps(block.get("input") or {}),
                }
            )
        elif (
            kind == "reasoning"
            and (block.get("raw") or {}).get("type") == "reasoning"
            or (
                kind == "unknown"
                and block.get("provider") == PROVIDER
                and isinstance(block.get("raw"), dict)
                and block["raw"].get("type")
            )
        ):
            items.append(block["raw"])
    flush()
    return items
