"""A local upstream speaking the Anthropic Messages wire for `lcm_eval fidelity --model`:
it records every request and answers with a summary it composes from that request, so the
fidelity gate has a real text to judge (no model, no network).

What it writes is what a careless model writes: a narrative of the sources (each request
the user typed, by its first sentence; the assistant's first sentence of each reply) and
the files the tool calls named, as one line, within the words the prompt asks for. Asked
again with names it left out (the gate's retry), it adds them as lines; asked to say what
happened, it repeats each item's subject, without saying what happened to it. So the gate's
decisions are real: how often the first answer passes, a retry helps, or the deterministic
summary takes its place.

    with RecordingUpstream() as upstream:
        AnthropicSummarizer(api_key="recording", base_url=upstream.url, model="recording", ...)
        upstream.requests  # the bodies received
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from compaction.summarizers.prompts import MUST_NAME_INSTRUCTION, MUST_SAY_INSTRUCTION

_MESSAGE = re.compile(r'<message ref="([^"]+)" role="(\w+)"[^>]*>\n(.*?)\n</message>', re.S)
_AIM = re.compile(r"Aim for at most (\d+) tokens")
_PATH = re.compile(r'"(?:file_path|filePath|path)": "([^"]+)"')
_WORDS_PER_TOKEN = 0.6


class RecordingUpstream:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                with upstream.lock:
                    upstream.requests.append(body)
                prompt = body["messages"][0]["content"]
                if isinstance(prompt, list):
                    prompt = "\n".join(b.get("text", "") for b in prompt if isinstance(b, dict))
                text = compose(prompt)
                reply = {
                    "id": f"msg_recording_{len(upstream.requests)}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "recording"),
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": len(prompt) // 4, "output_tokens": len(text) // 4},
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> RecordingUpstream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def compose(prompt: str) -> str:
    """The summary of the sources in `prompt`, as described in the module's docstring."""
    aim = _AIM.search(prompt)
    budget = int(int(aim.group(1)) * _WORDS_PER_TOKEN) if aim else 400
    lines, files = [], []
    for ref, role, content in _MESSAGE.findall(prompt.split("</source_material>")[0]):
        files.extend(_PATH.findall(content))
        prose = " ".join(line for line in content.splitlines() if not line.startswith("[tool "))
        first = re.split(r"(?<=[.!?])\s", prose.strip(), maxsplit=1)[0][:200]
        if role == "user" and first and not first.startswith(("<", "Caveat:")):
            lines.append(f"The user asked ({ref}): {first}")
        elif role == "assistant" and first:
            lines.append(f"The assistant ({ref}): {first}")
    if files:
        lines.append("Files touched: " + ", ".join(dict.fromkeys(files)))
    lines.extend(_asked_again(prompt))
    words, kept = 0, []
    for line in lines:
        size = len(line.split())
        if words + size > budget:
            continue
        kept.append(line)
        words += size
    kept.append("Expand for details about: tool outputs and the full messages.")
    return "\n".join(kept)


def _asked_again(prompt: str) -> list[str]:
    """The gate's retry: the names it lists as lines, and each thing it wants said, by its
    subject only (this upstream does not know what happened to it)."""
    added = []
    for instruction in (MUST_NAME_INSTRUCTION, MUST_SAY_INSTRUCTION):
        if instruction not in prompt:
            continue
        block = prompt.split(instruction, 1)[1].split("\n\n", 1)[0]
        for line in block.strip().splitlines():
            if instruction is MUST_SAY_INSTRUCTION:
                line = line.split(": ", 1)[0]  # the subject without what to say of it
            added.append(line.strip())
    return added
