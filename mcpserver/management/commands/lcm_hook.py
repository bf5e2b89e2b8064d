"""`manage.py lcm_hook session-start|pre-compact|post-compact|user-prompt-submit`: the
commands Claude Code's (and Codex's) hooks run (`lcm_connect claude-code --write` puts them in its settings;
docs/capture.md)."""

from __future__ import annotations

import json
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from mcpserver.hooks import pre_compact, repair, session_start
from mcpserver.hooks.remote import Remote, RemoteError
from mcpserver.server import SERVER_NAME

EVENTS = ("session-start", "pre-compact", "post-compact", "user-prompt-submit")
AGENTS = ("claude-code", "codex")


class Command(BaseCommand):
    help = (
        "Run a Claude Code hook: reads the hook's JSON input on stdin. session-start prints "
        "the hook JSON whose additionalContext tells the agent its past sessions are "
        "searchable through the MCP tools, with the user's pinned facts (within "
        "--pins-token-cap tokens). pre-compact imports the session's transcript_path (only "
        "what is new) before the agent compacts. After the agent compacted (session-start "
        "with source compact or resume) the additionalContext also carries the repair: what "
        "the agent's summary dropped that the work still needs, said as what happened, with "
        "the ids lcm_expand takes (LCM_REPAIR_TOKEN_BUDGET tokens; LCM_REPAIR_ENABLED=false "
        "turns it off); at startup in a project with a recent session, its hand-off "
        "(LCM_HANDOFF_RECENT_HOURS). post-compact links the compaction from its input and "
        "stores the repair; user-prompt-submit hands back a repair not handed back yet. "
        "Local (--user: this server's database) or remote (--server URL --token KEY: through "
        "the HTTP API; no repair). Never fails the agent: problems go to stderr and the exit "
        "status is 0."
    )

    def add_arguments(self, parser):
        parser.add_argument("event", choices=EVENTS, help="The hook event to handle.")
        parser.add_argument("--user", metavar="NAME", help="Local: the user who owns it all.")
        parser.add_argument("--server", metavar="URL", help="Remote: the server's base URL.")
        parser.add_argument("--token", metavar="KEY", help="Remote: an API token.")
        parser.add_argument(
            "--pins-token-cap",
            type=int,
            default=session_start.DEFAULT_PINS_TOKEN_CAP,
            metavar="N",
            help="session-start: pinned facts are added up to this many tokens "
            f"(default {session_start.DEFAULT_PINS_TOKEN_CAP}; 0: none).",
        )
        parser.add_argument(
            "--agent",
            choices=AGENTS,
            default="claude-code",
            help="The agent whose hook this is (the transcript's format; default claude-code).",
        )
        parser.add_argument(
            "--server-name",
            default=SERVER_NAME,
            help=f"The MCP server's name in the agent's config (default {SERVER_NAME}).",
        )

    def handle(self, *args, **options):
        if bool(options["server"]) != bool(options["token"]):
            raise CommandError("--server and --token go together")
        if not options["server"] and not options["user"]:
            raise CommandError("name the owner: --user NAME, or --server URL --token KEY")
        hook_input = _read_input(sys.stdin)
        try:
            if options["event"] == "session-start":
                self._session_start(options, hook_input)
            elif options["event"] == "post-compact":
                self._post_compact(options, hook_input)
            elif options["event"] == "user-prompt-submit":
                self._user_prompt_submit(options, hook_input)
            else:
                self._pre_compact(options, hook_input)
        except (RemoteError, pre_compact.HookInputError, CommandError) as error:
            self.stderr.write(f"lcm_hook {options['event']}: {error}")
        except Exception as error:  # noqa: BLE001 - a hook must never stop the agent
            self.stderr.write(f"lcm_hook {options['event']}: {type(error).__name__}: {error}")

    def _user(self, options):
        user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if user is None:
            raise CommandError(f"no active user named {options['user']!r}")
        return user

    def _remote(self, options) -> Remote | None:
        return Remote(options["server"], options["token"]) if options["server"] else None

    def _session_start(self, options, hook_input: dict) -> None:
        remote, cap = self._remote(options), max(0, options["pins_token_cap"])
        pins: list[str] = []
        handed_back = ""
        try:
            if cap:
                pins = (
                    session_start.remote_pins(remote)
                    if remote
                    else session_start.local_pins(self._user(options))
                )
            if not remote:
                handed_back = self._handed_back(options, hook_input)
        finally:
            # The note goes out even when the pins or the repair could not be read.
            output = session_start.session_start_output(
                server_name=options["server_name"], pins=pins, token_cap=cap, repair=handed_back
            )
            self.stdout.write(json.dumps(output))

    def _handed_back(self, options, hook_input: dict) -> str:
        source = hook_input.get("source")
        user = self._user(options)
        if source in ("compact", "resume"):
            return repair.pending_context(
                user=user,
                hook_input=hook_input,
                agent=options["agent"],
                event=f"SessionStart:{source}",
                fresh=True,
            )
        if source == "startup":
            return repair.handoff_context(user=user, hook_input=hook_input)
        return ""

    def _post_compact(self, options, hook_input: dict) -> None:
        if self._remote(options):
            return  # the repair is drawn where the session is stored: locally only
        stored = repair.store_compaction(
            user=self._user(options), hook_input=hook_input, agent=options["agent"]
        )
        said = f"{stored.tokens} tokens to hand back" if stored else "no agent compaction found"
        self.stderr.write(f"lcm: repair of the compaction: {said}")

    def _user_prompt_submit(self, options, hook_input: dict) -> None:
        """The repair of a compaction not handed back yet, as additionalContext; nothing
        (no output) otherwise, so the prompt goes on as it was."""
        if self._remote(options):
            return
        text = repair.pending_context(
            user=self._user(options),
            hook_input=hook_input,
            agent=options["agent"],
            event="UserPromptSubmit",
            fresh=False,
        )
        if text:
            output = {
                "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": text,
                }
            }
            self.stdout.write(json.dumps(output))

    def _pre_compact(self, options, hook_input: dict) -> None:
        path = pre_compact.transcript_of(hook_input)
        remote = self._remote(options)
        if remote:
            said = pre_compact.catch_up_remotely(path=path, remote=remote)
        else:
            said = pre_compact.catch_up_locally(path=path, user=self._user(options))
        self.stderr.write(said)


def _read_input(stream) -> dict:
    """The hook's JSON input; anything else is an empty input (a hook never fails)."""
    try:
        text = stream.read()
        data = json.loads(text) if text.strip() else {}
    except (ValueError, OSError):
        return {}
    return data if isinstance(data, dict) else {}
