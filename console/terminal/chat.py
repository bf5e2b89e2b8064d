"""The terminal chat loop: the console's header, streaming and commands over the HTTP API.

Plain lines in, plain lines out (stdin/stdout), so it works in any terminal, over ssh, in a
pipe and under a test's subprocess. It needs only the standard library: the requests go
through `client.py`, the streams through `sse.py`. A dropped stream is
resumed from the turn's event log with `Last-Event-ID`, skipping nothing and repeating
nothing (events are applied only once, by id).

`manage.py lcm_chat` wraps `main()`; the slash commands are listed by `/help`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO
from urllib.parse import quote, urlencode

from console.terminal.client import ApiClient, ApiError
from console.terminal.sse import SseEvent

# A server restart takes seconds: keep trying for about a minute, backing off to 2 s.
RESUME_ATTEMPTS = 40
RESUME_DELAY_SECONDS = 0.3
RESUME_MAX_DELAY_SECONDS = 2.0
TOOLS_MODES = ("disabled", "parse_only", "enabled")


def _rows(data) -> list:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in ("results", "items", "models", "hits", "branches", "turns"):
            if isinstance(data.get(key), list):
                return data[key]
    return []


def _q(value: str) -> str:
    return quote(str(value), safe="")


@dataclass
class Header:
    session: str = ""
    session_title: str = ""
    branch: str = ""
    branch_label: str = ""
    head_seq: int | None = None
    head_state_id: str = ""
    pending: int = 0
    phase: str = "idle"
    durable: int = 0
    displayed: int = 0
    streaming: bool = False

    def line(self) -> str:
        head = "none" if self.head_seq is None else str(self.head_seq)
        parts = [
            f"Session: {self.session_title or self.session} ({self.session})",
            f"Branch: {self.branch_label or self.branch}",
            f"Head: seq {head} {self.head_state_id}".rstrip(),
            f"Pending: {self.pending}",
            f"Phase: {self.phase}",
        ]
        if self.streaming or self.displayed:
            buffered = " buffered" if self.displayed > self.durable else ""
            parts.append(f"Stream: {self.durable}/{self.displayed} B{buffered}")
        return "[" + " | ".join(parts) + "]"


HELP = """Commands (anything else is sent as a message):
  /model [NAME]          list models, or use NAME for the next turns
  /tools [MODE]          show or set the tools mode: disabled, parse_only, enabled
  /history [N]           the last N turns (default 10) with their steps and tool calls
  /chunks [QUERY]        browse or search this branch's memory chunks
  /retrieve QUERY        search memory with similarity scores (then /attach ID)
  /attach ID [ID...]     attach chunks to the next turn (/attach - clears)
  /fork [TURN]           fork a new branch after turn TURN (seq or id; default the newest)
  /rollback STATE_SEQ    a new branch whose head is that state of this branch
  /branches              the branch tree
  /switch BRANCH         make BRANCH (id or label) the active branch
  /pin TEXT              pin a fact (always in the context)
  /unpin ID              remove a pinned fact (/pins lists them)
  /pins                  list pinned facts
  /pending               turns answered but not yet summarized into the state
  /commit                commit pending turns now
  /context [TURN]        what the model saw for TURN (default the newest)
  /status                print the header
  /help                  this help
  /quit                  leave (also Ctrl-D)"""


@dataclass
class Chat:
    api: ApiClient
    out: TextIO
    session_id: str = ""
    model: str = ""
    tools_mode: str = ""
    attached: list[str] = field(default_factory=list)
    header: Header = field(default_factory=Header)

    # --- output ---------------------------------------------------------------------------

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def show_header(self) -> None:
        self.say(self.header.line())

    # --- session and header ---------------------------------------------------------------

    def open(self, session_id: str | None, title: str = "") -> None:
        if session_id:
            session = self.api.request("GET", f"sessions/{_q(session_id)}/")
        else:
            body = {"title": title or "terminal chat"}
            if self.model:
                body["default_model"] = self.model
            session = self.api.request("POST", "sessions/", body)
        self.session_id = session["id"]
        self.header.session = session["id"]
        self.header.session_title = session.get("title", "")
        self.model = self.model or session.get("default_model", "") or self._default_model()
        self.tools_mode = self.tools_mode or session.get("tools_mode", "")
        self.refresh(session)

    def _default_model(self) -> str:
        models = _rows(self.api.request("GET", "models/"))
        return next((m["name"] for m in models if m.get("default")), "")

    def refresh(self, session: dict | None = None) -> None:
        """The header from the session detail (active branch, its head and pending count)."""
        session = session or self.api.request("GET", f"sessions/{_q(self.session_id)}/")
        if "branches" not in session:
            session = self.api.request("GET", f"sessions/{_q(self.session_id)}/")
        branch_id = session.get("active_branch_id")
        branch = next((b for b in session.get("branches", []) if b["id"] == branch_id), {})
        self.header.branch = branch_id or ""
        self.header.branch_label = branch.get("label", "")
        self.header.head_seq = session.get("head_seq", branch.get("head_seq"))
        self.header.head_state_id = (
            session.get("head_state_id") or branch.get("head_state_id") or ""
        )
        self.header.pending = int(session.get("pending_count", branch.get("pending_count", 0)) or 0)

    # --- sending and streaming --------------------------------------------------------------

    def send(self, text: str) -> None:
        body: dict = {"content": text, "stream": True}
        if self.model:
            body["model"] = self.model
        if self.tools_mode:
            body["tools_mode"] = self.tools_mode
        if self.attached:
            body["attach_chunk_ids"] = list(self.attached)
        state = {"turn": None, "last": 0, "ended": False, "open_line": False, "shown": ""}
        self.header.streaming = True
        self.header.durable = self.header.displayed = 0
        try:
            events = self.api.stream("POST", f"sessions/{_q(self.session_id)}/turns/", body)
            self._apply_all(events, state)
            self.attached = []
            attempts, reported = 0, None
            while not state["ended"] and state["turn"] and attempts < RESUME_ATTEMPTS:
                attempts += 1
                if reported != state["last"]:  # once per drop, not per retry
                    self._end_line(state)
                    self.say(f"(connection dropped; resuming after event {state['last']})")
                    reported = state["last"]
                time.sleep(min(RESUME_DELAY_SECONDS * attempts, RESUME_MAX_DELAY_SECONDS))
                path = f"turns/{_q(state['turn'])}/stream/?" + urlencode({"after": state["last"]})
                before = state["last"]
                self._apply_all(self.api.stream("GET", path, last_event_id=state["last"]), state)
                if state["last"] != before:
                    attempts = 0  # it made progress: a fresh budget for the next drop
            if not state["ended"]:
                self._end_line(state)
                self.say("(the stream was lost; /history shows the turn when it ends)")
        finally:
            self.header.streaming = False
        self._end_line(state)
        self.refresh()
        self.show_header()

    def _end_line(self, state: dict) -> None:
        if state["open_line"]:
            self.out.write("\n")
            self.out.flush()
            state["open_line"] = False

    def _apply_all(self, events: Iterator[SseEvent], state: dict) -> None:
        for event in events:
            if event.id is not None:
                if event.id <= state["last"]:
                    continue  # already applied before a resume
                state["last"] = event.id
            self._apply(event, state)
            if state["ended"]:
                return

    def _apply(self, event: SseEvent, state: dict) -> None:
        data = event.data
        if event.event == "turn":
            state["turn"] = state["turn"] or data.get("turn_id")
            self.header.phase = data.get("phase", self.header.phase)
            self.show_header()
        elif event.event == "context":
            self.header.phase = "context_prepared"
        elif event.event == "step" and data.get("status") == "streaming":
            self.header.phase = "responding"
            self.say("assistant:")
        elif event.event == "delta":
            state["shown"] += data.get("text", "")
            self.out.write(data.get("text", ""))
            self.out.flush()
            state["open_line"] = True
        elif event.event == "tool_call":
            self._end_line(state)
            self.say(f"  [tool call: {data.get('name', '?')}]")
        elif event.event == "tool_result":
            self._end_line(state)
            self.say(
                f"  [tool result: {data.get('name', '?')}{' (error)' if data.get('is_error') else ''}]"
            )
        elif event.event == "durable":
            self.header.durable = int(data.get("durable", 0))
            self.header.displayed = int(data.get("displayed", 0))
        elif event.event == "done":
            state["ended"] = True
            self.header.phase = data.get("phase", "response_finalized")
        elif event.event == "error":
            state["ended"] = True
            partial = data.get("partial_text") or ""
            if partial.startswith(state["shown"]) and len(partial) > len(state["shown"]):
                # the journal kept more than reached this client before the drop
                self.out.write(partial[len(state["shown"]) :])
                state["open_line"] = True
            self._end_line(state)
            self.header.phase = data.get("phase", "failed")
            if data.get("incomplete"):
                self.say(
                    "(incomplete: the answer stopped part-way; the partial output above is kept)"
                )
            self.say(f"error: {data.get('code', 'error')}: {data.get('message', '')}")

    # --- commands ---------------------------------------------------------------------------

    def command(self, line: str) -> bool:
        """Run one slash command; False means quit."""
        try:
            words = shlex.split(line[1:])
        except ValueError:
            words = line[1:].split()
        if not words:
            return True
        name, args = words[0].lower(), words[1:]
        rest = line[1:].strip()[len(words[0]) :].strip()
        if name in ("quit", "exit", "q"):
            return False
        handler = getattr(self, f"cmd_{name}", None)
        if handler is None:
            self.say(f"unknown command /{name}; /help lists them")
            return True
        try:
            handler(args, rest)
        except ApiError as error:
            self.say(f"error: {error.code}: {error.message}")
        return True

    def cmd_help(self, args, rest) -> None:
        self.say(HELP)

    def cmd_status(self, args, rest) -> None:
        self.refresh()
        self.show_header()

    def cmd_model(self, args, rest) -> None:
        models = _rows(self.api.request("GET", "models/"))
        names = [m["name"] for m in models]
        if not args:
            for m in models:
                mark = "*" if m["name"] == self.model else " "
                key = "" if m.get("available", True) else f"  (no key: set {m.get('api_key_env')})"
                self.say(
                    f" {mark} {m['name']:<12} {m['provider']:<10} {m.get('model_id', '')}{key}"
                )
            return
        if args[0] not in names:
            self.say(f"unknown model {args[0]!r}; configured: {', '.join(names)}")
            return
        self.model = args[0]
        self.say(f"model: {self.model}")

    def cmd_tools(self, args, rest) -> None:
        if args and args[0] not in TOOLS_MODES:
            self.say(f"tools mode must be one of {', '.join(TOOLS_MODES)}")
            return
        if args:
            self.tools_mode = args[0]
        self.say(f"tools: {self.tools_mode or 'the session default'}")

    def _turns(self) -> list[dict]:
        """The branch's whole visible history, oldest first (following the cursor pages)."""
        query = {"branch_id": self.header.branch, "limit": 1000}
        page = self.api.request("GET", f"sessions/{_q(self.session_id)}/turns/?" + urlencode(query))
        turns = _rows(page)
        while isinstance(page, dict) and page.get("next"):
            page = self.api.request("GET", self.api.relative(page["next"]))
            turns.extend(_rows(page))
        return turns

    def cmd_history(self, args, rest) -> None:
        limit = int(args[0]) if args and args[0].isdigit() else 10
        turns = self._turns()[-limit:]
        if not turns:
            self.say("no turns on this branch yet")
        for t in turns:
            user = (t.get("user_message") or {}).get("rendered_text", "")
            final = t.get("final_assistant_message") or {}
            label = " (incomplete)" if final.get("incomplete") else ""
            self.say(f"#{t['turn_seq']} [{t['phase']}] {t.get('primary_model', '')}  {t['id']}")
            self.say(f"  you: {user}")
            self.say(f"  assistant{label}: {final.get('rendered_text', '')}")
            for step in t.get("steps", []):
                outcome = step.get("outcome") or {}
                self.say(
                    f"  step {step.get('step_index')}: {outcome.get('status', '?')} "
                    f"{step.get('model_id', '')} {step.get('stream_durable_bytes', 0)}/"
                    f"{step.get('stream_displayed_bytes', 0)} B"
                )
                if t.get("tools_mode") == "disabled":
                    continue  # no tool calls to show; spare the request
                detail = self.api.request("GET", f"steps/{_q(step['id'])}/")
                for item in detail.get("normalized_items") or []:
                    if item.get("kind") == "tool_call":
                        self.say(
                            f"    tool call {item.get('name')} {json.dumps(item.get('arguments'))}"
                        )

    def _chunk_lines(self, rows: list[dict]) -> None:
        if not rows:
            self.say("nothing found")
        for row in rows:
            chunk = row.get("chunk", row)
            score = row.get("score", row.get("similarity"))
            text = " ".join(str(chunk.get("text", "")).split())
            sim = f" sim {float(score):.3f}" if isinstance(score, (int, float)) else ""
            self.say(f"  {chunk.get('id')}{sim}  {text[:160]}")

    def cmd_chunks(self, args, rest) -> None:
        path = f"branches/{_q(self.header.branch)}/chunks/"
        if rest:
            path += "?" + urlencode({"q": rest})
        self._chunk_lines(_rows(self.api.request("GET", path)))

    def cmd_retrieve(self, args, rest) -> None:
        if not rest:
            self.say("usage: /retrieve QUERY")
            return
        data = self.api.request(
            "POST", f"branches/{_q(self.header.branch)}/retrieve/", {"query": rest}
        )
        self._chunk_lines(_rows(data))
        self.say("attach one to the next turn with /attach ID")

    def cmd_attach(self, args, rest) -> None:
        if args == ["-"]:
            self.attached = []
        else:
            self.attached.extend(a for a in args if a not in self.attached)
        self.say(f"attached to the next turn: {', '.join(self.attached) or 'nothing'}")

    def _resolve_turn(self, ref: str | None) -> dict | None:
        turns = self._turns()
        if not turns:
            return None
        if not ref:
            return turns[-1]
        for t in turns:
            if t["id"] == ref or str(t["turn_seq"]) == ref.lstrip("#"):
                return t
        return None

    def cmd_fork(self, args, rest) -> None:
        turn = self._resolve_turn(args[0] if args else None)
        if args and turn is None:
            self.say(f"no turn {args[0]} on this branch")
            return
        body = {"turn_id": turn["id"]} if turn else {}
        branch = self.api.request("POST", f"branches/{_q(self.header.branch)}/fork/", body)
        self._activate(branch["id"])
        self.say(f"forked: branch {branch.get('label') or branch['id']} is now active")
        self.show_header()

    def cmd_rollback(self, args, rest) -> None:
        if not args or not args[0].isdigit():
            self.say("usage: /rollback STATE_SEQ")
            return
        branch = self.api.request(
            "POST", f"branches/{_q(self.header.branch)}/rollback/", {"state_seq": int(args[0])}
        )
        self._activate(branch["id"])
        self.say(f"rolled back: branch {branch.get('label') or branch['id']} is now active")
        self.show_header()

    def _activate(self, branch_id: str) -> None:
        self.api.request(
            "POST", f"sessions/{_q(self.session_id)}/activate-branch/", {"branch_id": branch_id}
        )
        self.refresh()

    def _branches(self) -> list[dict]:
        return self.api.request("GET", f"sessions/{_q(self.session_id)}/").get("branches", [])

    def cmd_branches(self, args, rest) -> None:
        branches = self._branches()
        children: dict = {}
        for b in branches:
            children.setdefault(b.get("parent_id"), []).append(b)
        known = {b["id"] for b in branches}

        def walk(b: dict, depth: int) -> None:
            mark = "*" if b["id"] == self.header.branch else " "
            fork = b.get("fork_turn_seq")
            where = f" forked after #{fork}" if fork is not None else ""
            self.say(f" {mark} {'  ' * depth}{b.get('label') or b['id']}  {b['id']}{where}")
            for child in children.get(b["id"], []):
                walk(child, depth + 1)

        for root in [b for b in branches if b.get("parent_id") not in known]:
            walk(root, 0)

    def cmd_switch(self, args, rest) -> None:
        if not rest:
            self.say("usage: /switch BRANCH (id or label)")
            return
        match = [b for b in self._branches() if rest in (b["id"], b.get("label"))]
        if not match:
            self.say(f"no branch {rest!r}; /branches lists them")
            return
        self._activate(match[0]["id"])
        self.show_header()

    def cmd_pin(self, args, rest) -> None:
        if not rest:
            self.say("usage: /pin TEXT")
            return
        data = self.api.request("POST", f"branches/{_q(self.header.branch)}/pins/", {"text": rest})
        pin = data.get("pin", data)
        self.say(f"pinned {pin.get('id', '')}: {pin.get('text', rest)}")
        self.refresh()
        self.show_header()

    def cmd_pins(self, args, rest) -> None:
        state = self.api.request("GET", f"branches/{_q(self.header.branch)}/state/")
        pins = state.get("pinned_facts", [])
        if not pins:
            self.say("no pinned facts")
        for pin in pins:
            self.say(f"  {pin['id']}  {pin['text']}")

    def cmd_unpin(self, args, rest) -> None:
        if not args:
            self.say("usage: /unpin ID (/pins lists them)")
            return
        self.api.request("DELETE", f"branches/{_q(self.header.branch)}/pins/{_q(args[0])}/")
        self.say(f"unpinned {args[0]}")
        self.refresh()
        self.show_header()

    def cmd_pending(self, args, rest) -> None:
        pending = [
            t
            for t in self._turns()
            if t.get("pending") and t.get("branch_id") == self.header.branch
        ]
        if not pending:
            self.say("nothing pending: the head state covers every answered turn")
        for t in pending:
            user = (t.get("user_message") or {}).get("rendered_text", "")
            self.say(f"  #{t['turn_seq']} [{t['phase']}] {user[:100]}")

    def cmd_commit(self, args, rest) -> None:
        self.api.request("POST", f"branches/{_q(self.header.branch)}/commit/", {})
        self.refresh()
        self.say("committed")
        self.show_header()

    def cmd_context(self, args, rest) -> None:
        turn = self._resolve_turn(args[0] if args else None)
        if turn is None:
            self.say("no turn to show")
            return
        data = self.api.request("GET", f"turns/{_q(turn['id'])}/context/")
        context = data.get("context", data) or {}
        self.say(f"what the model saw for turn #{turn['turn_seq']}:")
        sections = context.get("sections_tokens") or {}
        self.say("  tokens: " + ", ".join(f"{k} {v}" for k, v in sections.items()))
        for name in ("system", "state_summary"):
            if context.get(name):
                self.say(f"  {name}: {' '.join(str(context[name]).split())[:300]}")
        for pin in context.get("pinned_facts") or []:
            self.say(f"  pinned: {pin.get('text', pin) if isinstance(pin, dict) else pin}")
        if context.get("summaries"):
            self.say(f"  summaries: {len(context['summaries'])} (untrusted, quoted)")
        for message in context.get("history") or []:
            self.say(f"  history {message.get('role')}: {message.get('rendered_text', '')[:200]}")
        if "stable_messages" in context:
            self.say(
                f"  stable prefix: system, pins, summaries and {context['stable_messages']} "
                "messages (cacheable); the rest changes every turn"
            )
        for message in context.get("pending") or []:
            self.say(f"  pending {message.get('role')}: {message.get('rendered_text', '')[:200]}")
        for item in context.get("retrieved") or []:
            score = item.get("score")
            sim = f" sim {score:.3f}" if isinstance(score, (int, float)) else ""
            text = " ".join(str(item.get("text", "")).split())
            self.say(f"  retrieved {item.get('chunk_id') or item.get('id')}{sim}: {text[:200]}")
        user = context.get("user") or {}
        self.say(f"  user: {user.get('rendered_text', '') if isinstance(user, dict) else user}")
        for step in context.get("shrink_steps") or []:
            self.say(f"  shrink: {step}")

    # --- the loop ---------------------------------------------------------------------------

    def run(self, lines: TextIO) -> int:
        self.show_header()
        self.say("type a message, or /help")
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            try:
                if line.startswith("/"):
                    if not self.command(line):
                        break
                else:
                    self.send(line)
            except ApiError as error:
                self.say(f"error: {error.code}: {error.message}")
            except (OSError, http.client.HTTPException) as error:
                self.say(f"connection error: {error}")
        return 0


def main(
    *,
    url: str,
    token: str,
    session: str | None,
    title: str = "",
    model: str = "",
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
) -> int:
    out = stdout or sys.stdout
    chat = Chat(api=ApiClient(url, token), out=out, model=model)
    try:
        chat.open(session, title=title)
    except ApiError as error:
        out.write(f"error: {error.code}: {error.message}\n")
        return 2
    except OSError as error:
        out.write(f"cannot reach {url}: {error}\n")
        return 2
    return chat.run(stdin or _input_lines())


def _input_lines() -> Iterator[str]:
    """Lines from the keyboard with line editing (readline) when stdin is a terminal."""
    if not sys.stdin.isatty():
        yield from sys.stdin
        return
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (enables editing and history for input())
    while True:
        try:
            yield input("> ") + "\n"
        except EOFError:
            return
