"""What Claude Code's hooks run: `python .../mcpserver/hooks/client.py EVENT ...`
(`lcm_connect claude-code --write` puts the command in its settings; docs/capture.md,
"Claude Code hooks").

Standard library only, and run as a file, so it starts in tens of milliseconds and never
imports Django: a hook runs inside the agent, and the agent waits for it. Whatever happens
(server down, database down, a server that accepts and never answers) it answers within
`DEADLINE_SECONDS` and exits 0; at worst the agent gets one line saying recall is
unavailable right now.

- session-start: the answer is Claude Code's hook JSON, made by the server (remote:
  `POST {server}/api/v1/hooks/session-start/`) or by `manage.py lcm_hook session-start`
  (local: a child process, given what is left of the deadline and killed past it). It is
  printed as it came, so whatever the server adds to it reaches the agent.
- pre-compact: the hook input is written to the spool first (a file per hook, in
  `spool_dir()`), then a detached replay catches the transcript up (remote: uploads it;
  local: `manage.py lcm_hook replay`) and removes the spool entry once the import is
  stored. The hook waits for that replay only while its deadline allows; an entry that
  could not be delivered stays and is replayed by the next hook that reaches the server
  (or `manage.py lcm_hook replay`); the watcher follows the same transcripts too.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

# From the process's start (Python's own start takes 0.1-1 s on a busy machine), leaving
# time to print, stop the local child and exit: the hook ends within 2 s (at 1.6 s, a
# SessionStart took 2.07 s under a loaded CI run).
DEADLINE_SECONDS = 1.4
UPLOAD_TIMEOUT_SECONDS = 120  # the detached replay's upload of one transcript
MANAGE_PY = Path(__file__).resolve().parents[2] / "manage.py"
EVENTS = ("session-start", "pre-compact", "post-compact", "user-prompt-submit", "replay")
REPLAY_LOG = "replay.log"  # in the spool: what the detached deliveries said
REPLAY_LOG_BYTES = 256 * 1024  # then it starts again
SERVER_NAME = "lcm"
UNAVAILABLE = (
    "Lossless memory of past sessions (MCP server `{server}`) is unavailable right now "
    "({reason}); go on without it."
)


def spool_dir() -> Path:
    """Where hooks leave what they could not deliver: $LCM_HOOK_SPOOL, else
    $XDG_STATE_HOME/lcm/hook-spool (~/.local/state/lcm/hook-spool)."""
    if os.environ.get("LCM_HOOK_SPOOL"):
        return Path(os.environ["LCM_HOOK_SPOOL"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "lcm" / "hook-spool"


def owner_key(*, user: str | None, server: str | None) -> str:
    """Who a spool entry is for: a local user, or a server (never its token)."""
    return f"server:{server.rstrip('/')}" if server else f"user:{user}"


def spool_write(hook_input: dict, *, owner: str, directory: Path | None = None) -> Path:
    """One entry per hook, written whole (temporary file, then rename)."""
    directory = directory or spool_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.json"
    entry = {"owner": owner, "hook_input": hook_input, "spooled_at": time.time()}
    temporary = directory / f".{name}.tmp"
    temporary.write_text(json.dumps(entry), encoding="utf-8")
    temporary.chmod(0o600)
    temporary.rename(directory / name)
    spool_entries(owner=owner, directory=directory)  # an older entry of the same transcript goes
    return directory / name


def spool_entries(*, owner: str, directory: Path | None = None) -> list[tuple[Path, dict]]:
    """The entries for `owner`, oldest first; the same transcript once (its newest)."""
    directory = directory or spool_dir()
    found: dict[str, tuple[Path, dict]] = {}
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and entry.get("owner") == owner:
            transcript = str((entry.get("hook_input") or {}).get("transcript_path") or path)
            if transcript in found:
                found[transcript][0].unlink(missing_ok=True)  # an older catch-up of the same
            found[transcript] = (path, entry)
    return list(found.values())


def answer_cache(owner: str, directory: Path | None = None) -> Path:
    """The last session-start answer made for `owner` (local hooks answer from it when
    Django cannot start within the deadline)."""
    name = "".join(c if c.isalnum() else "-" for c in owner)
    return (directory or spool_dir()) / f"session-start-{name}.answer"


def cache_write(path: Path, *, answer: dict | None, started_at: float, reason: str = "") -> None:
    """`answer` (None: unavailable, for `reason`), written whole, unless an answer begun
    later is there already (a child that waited on a database down ends after the one
    that found it back)."""
    try:
        there = json.loads(path.read_text(encoding="utf-8")).get("started_at", 0)
    except (OSError, ValueError, AttributeError):
        there = 0
    if there > started_at:
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    entry = {"answer": answer, "reason": reason, "started_at": started_at}
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(entry), encoding="utf-8")
    temporary.chmod(0o600)
    temporary.rename(path)


def repair_note_path(owner: str, session_id: str, directory: Path | None = None) -> Path:
    """Where `lcm_hook post-compact` leaves a compaction's repair for the session's next
    prompt (read here without starting Django)."""
    name = "".join(c if c.isalnum() else "-" for c in f"{owner}-{session_id}")
    return (directory or spool_dir()) / f"repair-{name}.note"


def repair_note_write(owner: str, session_id: str, text: str, directory: Path | None) -> None:
    path = repair_note_path(owner, session_id, directory)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.chmod(0o600)
    temporary.rename(path)


def repair_note_take(owner: str, session_id: str, directory: Path | None) -> str:
    """The note's text, once (the file goes: two prompts at once, one of them gets it)."""
    path = repair_note_path(owner, session_id, directory)
    taken = path.with_suffix(f".{os.getpid()}.taken")
    try:
        path.rename(taken)
        text = taken.read_text(encoding="utf-8")
    except OSError:
        return ""
    taken.unlink(missing_ok=True)
    return text


def prompt_context(text: str) -> dict:
    """UserPromptSubmit's answer: `text` for the model, beside the prompt."""
    return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": text}}


def _cached(path: Path, reason: str) -> dict:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise Unreachable(reason) from None
    if isinstance(entry, dict) and isinstance(entry.get("answer"), dict):
        return entry["answer"]
    raise Unreachable(str(entry.get("reason") or reason) if isinstance(entry, dict) else reason)


def _log(directory: Path | None):
    """The spool's log, where the detached children write (started again past its size)."""
    path = (directory or spool_dir()) / REPLAY_LOG
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    kept = path.is_file() and path.stat().st_size < REPLAY_LOG_BYTES
    return path.open("ab" if kept else "wb")


class Unreachable(Exception):
    """The server could not answer in time (down, slow, refused, or an error)."""


def _post(url: str, token: str, body: bytes, content_type: str, deadline: float):
    """POST, answered by `deadline` (monotonic) or Unreachable."""
    import urllib.error  # here: the local hooks never pay for it (0.1-0.3 s on a busy machine)
    import urllib.request

    timeout = deadline - time.monotonic()  # after the imports: they count too
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Authorization", f"Token {token}")
    request.add_header("Accept", "application/json")
    request.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(request, timeout=max(timeout, 0.05)) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        raise Unreachable(f"HTTP {error.code}") from None
    except (OSError, ValueError) as error:  # URLError is an OSError
        reason = getattr(error, "reason", error)
        raise Unreachable(f"{type(reason).__name__}: {reason}"[:120]) from None


def _multipart(fields: dict[str, str], file: Path) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    lines: list[bytes] = []
    for name, value in fields.items():
        disposition = f'Content-Disposition: form-data; name="{name}"'
        lines += [f"--{boundary}".encode(), disposition.encode(), b"", value.encode()]
    disposition = f'Content-Disposition: form-data; name="file"; filename="{file.name}"'
    lines += [f"--{boundary}".encode(), disposition.encode()]
    lines += [b"Content-Type: application/octet-stream", b"", file.read_bytes()]
    lines += [f"--{boundary}--".encode(), b""]
    return b"\r\n".join(lines), f"multipart/form-data; boundary={boundary}"


def unavailable(event: str, server_name: str, reason: str) -> dict:
    """The fail-open answer: one line of context (SessionStart), nothing otherwise."""
    if event != "session-start":
        return {}
    context = UNAVAILABLE.format(server=server_name, reason=reason)
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}}


class Hook:
    def __init__(self, options: argparse.Namespace, hook_input: dict, started: float):
        self.options = options
        self.hook_input = hook_input
        self.deadline = started + options.deadline
        self.owner = owner_key(user=options.user, server=options.server)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def manage(self, *args: str) -> list[str]:
        owner = ["--user", self.options.user]
        return [sys.executable, str(MANAGE_PY), "lcm_hook", *args, *owner]

    # -- session-start ---------------------------------------------------------------

    def session_start(self) -> dict:
        options = self.options
        if options.server:
            body = {
                "hook_input": self.hook_input,
                "server_name": options.server_name,
                "pins_token_cap": options.pins_token_cap,
            }
            url = options.server.rstrip("/") + "/api/v1/hooks/session-start/"
            answer = _post(url, options.token, json.dumps(body).encode(), "application/json",
                           self.deadline)  # fmt: skip
        else:
            answer = self._local_answer()
        if not isinstance(answer, dict):
            raise Unreachable("an answer that is not a JSON object")
        self.replay_in_background()  # the server answered: what waits in the spool goes now
        return answer

    def _local_answer(self):
        """`manage.py lcm_hook session-start` answers, and keeps its answer in the cache.
        Django takes longer to start than the hook may wait on a busy machine (1-10 s):
        past the deadline the child goes on alone, refreshing the cache for the next
        session, and this hook answers from the cache (the note and pins as the last
        answer said them, or the one line saying the database was unreachable)."""
        options = self.options
        cache = answer_cache(self.owner, options.spool)
        command = self.manage("session-start", "--server-name", options.server_name,
                              "--pins-token-cap", str(options.pins_token_cap),
                              "--cache", str(cache))  # fmt: skip
        try:
            with _log(options.spool) as log:
                child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, start_new_session=True)  # fmt: skip
        except OSError as error:
            raise Unreachable(f"cannot start {MANAGE_PY.name}: {error}") from None
        try:
            out, _ = child.communicate(json.dumps(self.hook_input).encode(), max(self.left(), 0))
        except subprocess.TimeoutExpired:  # left running: it refreshes the cache
            return _cached(cache, f"no answer within {self.options.deadline:g} s")
        try:
            return json.loads(out or b"null")
        except ValueError:
            return _cached(cache, "an answer that is not JSON")

    # -- post-compact and user-prompt-submit: the repair (docs/capture.md, "Repair") ----

    def post_compact(self) -> dict:
        """Local: `lcm_hook post-compact` links the compaction and leaves its repair for
        the next prompt, detached (it outlives this hook). Remote: no repair."""
        if self.options.server:
            return {}
        command = self.manage("post-compact")
        if self.options.spool:
            command += ["--spool", str(self.options.spool)]
        with _log(self.options.spool) as log:
            child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=log,
                                     start_new_session=True)  # fmt: skip
        child.stdin.write(json.dumps(self.hook_input).encode())
        child.stdin.close()
        return {}

    def user_prompt_submit(self) -> dict:
        """A repair left by post-compact goes with this prompt; a detached `lcm_hook
        user-prompt-submit` then marks it handed back. Nothing otherwise (no Django)."""
        session = self.hook_input.get("session_id")
        if self.options.server or not isinstance(session, str):
            return {}
        text = repair_note_take(self.owner, session, self.options.spool)
        if not text:
            return {}
        with _log(self.options.spool) as log:
            child = subprocess.Popen(self.manage("user-prompt-submit"), stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=log,
                                     start_new_session=True)  # fmt: skip
        child.stdin.write(json.dumps(self.hook_input).encode())
        child.stdin.close()
        return prompt_context(text)

    # -- pre-compact and the spool -----------------------------------------------------

    def pre_compact(self) -> dict:
        spool_write(self.hook_input, owner=self.owner, directory=self.options.spool)
        replay = self.replay_in_background()
        try:
            replay.wait(max(self.left(), 0))
            done = "stored" if replay.returncode == 0 else "kept in the spool"
        except subprocess.TimeoutExpired:
            done = "still being stored in the background"
        sys.stderr.write(f"lcm: transcript {done}\n")
        return {}

    def replay_in_background(self) -> subprocess.Popen | None:
        """A detached process that delivers this owner's spool, outliving this hook."""
        options = self.options
        if not spool_entries(owner=self.owner, directory=options.spool):
            return None
        if options.server:
            command = [sys.executable, str(Path(__file__).resolve()), "replay",
                       "--server", options.server, "--token", options.token]  # fmt: skip
        else:
            command = self.manage("replay")
        if options.spool:
            command += ["--spool", str(options.spool)]
        with _log(options.spool) as log:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )


def replay_remote(options: argparse.Namespace) -> int:
    """Upload each spooled transcript to the server's import API; an entry goes once the
    server took it. Returns how many are left."""
    owner = owner_key(user=None, server=options.server)
    left = 0
    for path, entry in spool_entries(owner=owner, directory=options.spool):
        transcript = Path(str((entry.get("hook_input") or {}).get("transcript_path") or ""))
        if not transcript.is_file():
            path.unlink(missing_ok=True)  # nothing to catch up any more
            continue
        body, content_type = _multipart({"format": "claude-code"}, transcript)
        try:
            url = options.server.rstrip("/") + "/api/v1/imports/"
            _post(url, options.token, body, content_type, time.monotonic() + UPLOAD_TIMEOUT_SECONDS)
        except Unreachable as error:
            sys.stderr.write(f"lcm: {transcript.name}: {error}; kept in the spool\n")
            left += 1
            continue
        path.unlink(missing_ok=True)
    return left


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="lcm hook",
        description="Claude Code's hooks for LCM: session-start (the memory note and pinned "
        "facts), pre-compact (the transcript caught up, through a spool), post-compact (the "
        "compaction's repair drawn, detached), user-prompt-submit (the repair handed back "
        "once), replay (deliver the spool). Answers within --deadline seconds and exits 0 "
        "whatever happens.",
    )
    parser.add_argument("event", choices=EVENTS)
    parser.add_argument("--user", help="Local: the user who owns it all (this checkout's DB).")
    parser.add_argument("--server", help="Remote: the server's base URL.")
    parser.add_argument("--token", help="Remote: an API token.")
    parser.add_argument("--server-name", default=SERVER_NAME)
    parser.add_argument("--pins-token-cap", type=int, default=300)
    parser.add_argument("--spool", type=Path, default=None, help="The spool folder.")
    parser.add_argument("--deadline", type=float, default=DEADLINE_SECONDS)
    options = parser.parse_args(argv)
    if bool(options.server) != bool(options.token) or not (options.server or options.user):
        parser.error("name the owner: --user NAME, or --server URL --token KEY")
    return options


def read_input(stream) -> dict:
    try:
        text = stream.read()
        data = json.loads(text) if text.strip() else {}
    except (ValueError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


def process_started() -> float:
    """When this process began, on the monotonic clock (Linux: from /proc; elsewhere: now),
    so the deadline counts the interpreter's start too."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return time.monotonic()
    return time.monotonic() - min(max(age, 0.0), 1.0)


def main(argv: list[str] | None = None) -> int:
    started = process_started()
    options = _arguments(argv)
    if options.event == "replay":  # the detached delivery of the spool: 1 if some is left
        if options.server:
            return 1 if replay_remote(options) else 0
        spool = ["--spool", str(options.spool)] if options.spool else []
        command = [*Hook(options, {}, started).manage("replay"), *spool]
        return subprocess.run(command, check=False).returncode
    hook = Hook(options, read_input(sys.stdin), started)
    try:
        answer = {
            "session-start": hook.session_start,
            "pre-compact": hook.pre_compact,
            "post-compact": hook.post_compact,
            "user-prompt-submit": hook.user_prompt_submit,
        }[options.event]()
    except Unreachable as error:
        sys.stderr.write(f"lcm: {options.event}: {error}\n")
        answer = unavailable(options.event, options.server_name, str(error))
    except Exception as error:  # noqa: BLE001 - a hook never stops the agent
        sys.stderr.write(f"lcm: {options.event}: {type(error).__name__}: {error}\n")
        answer = unavailable(options.event, options.server_name, type(error).__name__)
    if answer:
        sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
