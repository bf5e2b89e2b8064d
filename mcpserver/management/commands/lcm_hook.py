"""`manage.py lcm_hook session-start|pre-compact|post-compact|user-prompt-submit|replay`:
Claude Code's (and Codex's) hooks on this server's database. The hooks in the agent's
settings run the light client (mcpserver/hooks/client.py), which calls this command within
its deadline, or detached (docs/capture.md, "Claude Code hooks" and "Repair")."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from mcpserver.hooks import client, pre_compact, repair, session_start
from mcpserver.hooks.client import SERVER_NAME

EVENTS = ("session-start", "pre-compact", "post-compact", "user-prompt-submit", "replay")
AGENTS = ("claude-code", "codex")
STARTED_AT = time.time()  # when this process began (its answer is as of then)


class Command(BaseCommand):
    help = (
        "Run a Claude Code hook: reads the hook's JSON input on stdin. session-start prints "
        "the hook JSON whose additionalContext tells the agent its past sessions are "
        "searchable through the MCP tools, with the user's pinned facts (within "
        "--pins-token-cap tokens). pre-compact imports the session's transcript_path (only "
        "what is new). post-compact links the agent's compaction from its input, draws the "
        "repair (what the agent's summary dropped that the work still needs, said as what "
        "happened, with the ids lcm_expand takes; LCM_REPAIR_TOKEN_BUDGET tokens, "
        "LCM_REPAIR_ENABLED=false turns it off) and leaves it in the spool for the next "
        "prompt; user-prompt-submit hands back a repair not handed back yet. session-start "
        "at startup in a project with a recent session adds its hand-off "
        "(LCM_HANDOFF_RECENT_HOURS). replay imports what the hook client spooled (--spool). "
        "Local (--user: this server's database) or remote (--server URL --token KEY: the hook "
        "client, through the HTTP API; no repair). Never fails the agent: problems go to "
        "stderr and the exit status is 0."
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
            "--server-name",
            default=SERVER_NAME,
            help=f"The MCP server's name in the agent's config (default {SERVER_NAME}).",
        )
        parser.add_argument(
            "--cache", type=Path, default=None, metavar="FILE",
            help="session-start: also keep the answer there (the hook client answers from "
            "it when this command cannot start in time).",
        )  # fmt: skip
        parser.add_argument(
            "--spool", type=Path, default=None, metavar="DIR",
            help="replay, post-compact: the hook client's spool (default $LCM_HOOK_SPOOL, "
            "else $XDG_STATE_HOME/lcm/hook-spool).",
        )  # fmt: skip
        parser.add_argument(
            "--agent", choices=AGENTS, default="claude-code",
            help="Whose hook this is (the transcript format of its compaction).",
        )  # fmt: skip

    def handle(self, *args, **options):
        if bool(options["server"]) != bool(options["token"]):
            raise CommandError("--server and --token go together")
        if not options["server"] and not options["user"]:
            raise CommandError("name the owner: --user NAME, or --server URL --token KEY")
        if options["server"]:
            return self._through_the_client(options)
        if options["event"] == "replay":  # detached, after a hook: exit 1 if some is left
            try:
                said = pre_compact.replay_spool(user=self._user(options), spool=options["spool"])
            except Exception as error:
                raise CommandError(f"{type(error).__name__}: {error}; kept in the spool") from None
            self.stderr.write("\n".join(said) or "lcm: nothing spooled")
            return
        hook_input = client.read_input(sys.stdin)
        try:
            if options["event"] == "session-start":
                self._session_start(options, hook_input)
            elif options["event"] == "post-compact":
                self._post_compact(options, hook_input)
            elif options["event"] == "user-prompt-submit":
                self._user_prompt_submit(options, hook_input)
            else:
                path = pre_compact.transcript_of(hook_input)
                self.stderr.write(pre_compact.catch_up_locally(path=path, user=self._user(options)))
        except (pre_compact.HookInputError, CommandError) as error:
            self.stderr.write(f"lcm_hook {options['event']}: {error}")
        except Exception as error:  # noqa: BLE001 - a hook must never stop the agent
            self.stderr.write(f"lcm_hook {options['event']}: {type(error).__name__}: {error}")

    def _user(self, options):
        user = get_user_model().objects.filter(username=options["user"], is_active=True).first()
        if user is None:
            raise CommandError(f"no active user named {options['user']!r}")
        return user

    def _session_start(self, options, hook_input: dict) -> None:
        cap, user, server_name = max(0, options["pins_token_cap"]), None, options["server_name"]
        try:
            if cap:
                user = self._user(options)
        except CommandError as error:  # the note goes out even when the pins cannot be read
            self.stderr.write(f"lcm_hook session-start: {error}")
        cache, handed_back = options["cache"], ""
        try:
            try:
                handed_back = self._handed_back(options, hook_input)
            except CommandError as error:  # no repair or hand-off: the note still goes out
                self.stderr.write(f"lcm_hook session-start: {error}")
            output = session_start.session_start_answer(
                user=user,
                hook_input=hook_input,
                server_name=server_name,
                token_cap=cap,
                repair=handed_back,
            )
        except DatabaseError as error:  # the tools cannot answer either: say so, in one line
            self.stderr.write(f"lcm_hook session-start: {type(error).__name__}: {error}")
            output = client.unavailable("session-start", server_name, "database unreachable")
            if cache:
                client.cache_write(cache, answer=None, reason="database unreachable",
                                   started_at=STARTED_AT)  # fmt: skip
        else:
            # What any session may reuse: not a compaction's answer, nor a hand-off.
            if cache and hook_input.get("source") != "compact" and not handed_back:
                client.cache_write(cache, answer=output, started_at=STARTED_AT)
        with contextlib.suppress(BrokenPipeError):  # the hook answered from the cache, gone
            self.stdout.write(json.dumps(output))

    def _handed_back(self, options, hook_input: dict) -> str:
        """After a compaction or on resume: a repair not handed back yet; at startup: the
        hand-off of the project's recent session."""
        source = hook_input.get("source")
        if source in ("compact", "resume"):
            return repair.pending_context(
                user=self._user(options),
                hook_input=hook_input,
                agent=options["agent"],
                event=f"SessionStart:{source}",
                fresh=True,
            )
        if source == "startup":
            return repair.handoff_context(user=self._user(options), hook_input=hook_input)
        return ""

    def _post_compact(self, options, hook_input: dict) -> None:
        """Link the compaction, draw its repair, and leave its text where the hook client
        finds it with the next prompt (client.repair_note_path) without starting Django."""
        user = self._user(options)
        stored = repair.store_compaction(user=user, hook_input=hook_input, agent=options["agent"])
        said = f"{stored.tokens} tokens to hand back" if stored else "no agent compaction found"
        self.stderr.write(f"lcm: repair of the compaction: {said}")
        text = repair.pending_text(user=user, hook_input=hook_input)
        session = hook_input.get("session_id")
        if text and isinstance(session, str):
            owner = client.owner_key(user=options["user"], server=None)
            client.repair_note_write(owner, session, text, options["spool"])

    def _user_prompt_submit(self, options, hook_input: dict) -> None:
        """The repair of a compaction not handed back yet, as additionalContext (marked
        handed back); nothing otherwise, so the prompt goes on as it was."""
        text = repair.pending_context(
            user=self._user(options),
            hook_input=hook_input,
            agent=options["agent"],
            event="UserPromptSubmit",
            fresh=False,
        )
        if text:
            with contextlib.suppress(BrokenPipeError):  # the client answered already, gone
                self.stdout.write(json.dumps(client.prompt_context(text)))

    def _through_the_client(self, options) -> None:
        argv = [options["event"], "--server", options["server"], "--token", options["token"],
                "--server-name", options["server_name"],
                "--pins-token-cap", str(options["pins_token_cap"])]  # fmt: skip
        if options["spool"]:
            argv += ["--spool", str(options["spool"])]
        stdout, stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.stdout, self.stderr  # the client writes to sys.std*
        try:
            client.main(argv)
        finally:
            sys.stdout, sys.stderr = stdout, stderr
