"""`manage.py lcm_mcp` answers an agent's MCP handshake before Django and the MCP SDK have
loaded (seconds on a busy machine), so an agent that waits about a second for its optional
servers (Codex) has the lcm tools on its first turn.

Standard library only, run by manage.py before anything else is imported: the first line
on stdin (`initialize`) is answered at once with the server's name, version, instructions
and capabilities, and a `tools/list` that comes before the server is ready is answered from
the list the previous start wrote (`LCM_DATA_DIR/mcp/tools-list.json`; the first start ever
waits for the server). Then stdin and stdout are handed to the real server through pipes:
the `initialize` is replayed to it and its own answer (and its answer to a `tools/list`
already answered) is dropped, so the agent sees each answer once. The real server writes
the tools list for the next start (`remember_tools`).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from pathlib import Path

from mcpserver.hooks.client import SERVER_NAME  # the one name (stdlib-only module)

INSTRUCTIONS = (
    "Lossless Context Management: every message you stored is kept; older history is "
    "compacted into summaries (sum_...) and large files (file_...). Route with lcm_grep "
    "and lcm_describe, read with lcm_expand, and delegate deep reads to lcm_expand_query."
)
# The protocol versions the MCP SDK in use speaks (newest last); a client asking for
# another one is answered with the newest, as the SDK does.
PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")


def tools_cache() -> Path:
    return Path(os.environ.get("LCM_DATA_DIR") or "./var") / "mcp" / "tools-list.json"


def remember_tools(tools: list[dict]) -> None:
    """The tools list, for the next start's early answer (best effort)."""
    path = tools_cache()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"tools": tools}))
        temporary.replace(path)
    except OSError:
        pass


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lcm-server")
    except PackageNotFoundError:
        return ""


def initialize_result(params: dict) -> dict:
    asked = params.get("protocolVersion")
    return {
        "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": _version()},
        "instructions": INSTRUCTIONS,
    }


def _write(fd: int, message: dict) -> None:
    os.write(fd, (json.dumps(message, separators=(",", ":")) + "\n").encode())


class _Front:
    def __init__(self, real_in: int, real_out: int, to_server: int) -> None:
        self.real_in, self.real_out, self.to_server = real_in, real_out, to_server
        self.answered: set = set()  # ids of requests answered here
        self.ready = threading.Event()  # the real server answered its initialize
        self.lock = threading.Lock()
        cached = tools_cache()
        self.tools = json.loads(cached.read_text()) if cached.is_file() else None

    def inbound(self, first: bytes) -> None:
        """stdin -> the real server; early requests it cannot answer yet answered here."""
        os.write(self.to_server, first)
        buffered = b""
        while chunk := os.read(self.real_in, 65536):
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                self._early(line)
                os.write(self.to_server, line + b"\n")
        os.close(self.to_server)

    def _early(self, line: bytes) -> None:
        if self.ready.is_set() or self.tools is None:
            return
        try:
            message = json.loads(line)
        except ValueError:
            return
        if isinstance(message, dict) and message.get("method") == "tools/list":
            with self.lock:
                self.answered.add(message.get("id"))
                _write(
                    self.real_out, {"jsonrpc": "2.0", "id": message.get("id"), "result": self.tools}
                )

    def outbound(self, from_server: int, init_id) -> None:
        """The real server -> stdout, without the answers already given here."""
        buffered = b""
        while chunk := os.read(from_server, 65536):
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                if self._drop(line, init_id):
                    continue
                os.write(self.real_out, line + b"\n")

    def _drop(self, line: bytes, init_id) -> bool:
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or "method" in message:
            return False
        if not self.ready.is_set() and message.get("id") == init_id:
            self.ready.set()
            return True
        with self.lock:
            if message.get("id") in self.answered:
                self.answered.discard(message.get("id"))
                return True
        return False


def answer_initialize_early() -> None:
    """Answer the handshake now; leave fds 0 and 1 as pipes to and from the front."""
    real_in, real_out = os.dup(0), os.dup(1)
    first = b""
    while not first.endswith(b"\n"):
        chunk = os.read(real_in, 1)
        if not chunk:
            break
        first += chunk
    try:
        message = json.loads(first)
    except ValueError:
        message = None
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    front = _Front(real_in, real_out, in_write)
    init_id = None
    if isinstance(message, dict) and message.get("method") == "initialize":
        init_id = message.get("id")
        result = initialize_result(message.get("params") or {})
        _write(real_out, {"jsonrpc": "2.0", "id": init_id, "result": result})
    else:
        front.ready.set()  # not a handshake: everything goes to the server as it is
    threading.Thread(target=front.inbound, args=(first,), daemon=True).start()
    outbound = threading.Thread(target=front.outbound, args=(out_read, init_id), daemon=True)
    outbound.start()
    os.dup2(in_read, 0)
    os.dup2(out_write, 1)
    os.close(in_read)
    os.close(out_write)
    sys.stdout = os.fdopen(1, "w", closefd=False)

    def flush_at_exit() -> None:  # the server's last answers reach the agent
        sys.stdout.flush()
        os.close(1)
        outbound.join(timeout=2)

    atexit.register(flush_at_exit)
