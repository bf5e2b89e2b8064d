"""`manage.py lcm_connect AGENT`: this server in a coding agent's MCP configuration."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from mcpserver.connect import claude_hooks, claude_proxy, codex_catalog, merge, proxy
from mcpserver.connect.agents import AGENTS, SCOPES
from mcpserver.connect.config_files import ConfigFileError, Merged, json_text, read_json
from mcpserver.connect.credentials import CredentialsError, owner_and_token
from mcpserver.connect.target import ServerTarget, base_url_of, passed_env
from mcpserver.server import SERVER_NAME, listed_tools
from mcpserver.stdio_front import remember_tools


class Command(BaseCommand):
    help = (
        "Print, and with --write merge into the agent's own config file, the MCP server "
        "entry that connects AGENT (claude-code, codex, opencode, gemini) to this server's "
        "tools, so it can search every session of every agent (docs/capture.md). stdio "
        "(default): the agent starts `manage.py lcm_mcp --user NAME` itself. --url: "
        "Streamable HTTP to URL/mcp/ with the user's API token (--token, or one issued for "
        "--user). For claude-code also its SessionStart, PreCompact, PostCompact and "
        "UserPromptSubmit hooks (lcm_hook: notes, catch-up, the repair after its compaction). "
        "--write backs the file up first (NAME.lcm-backup-TIME), changes only this entry "
        "and the hooks, and does nothing when they are already there. claude-code --proxy "
        "--url URL: instead, Claude Code's model calls go through URL/anthropic (its "
        "settings' env: ANTHROPIC_BASE_URL and an X-LCM-Token line in "
        "ANTHROPIC_CUSTOM_HEADERS, merged; --remove takes them out again; docs/agents.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent", choices=sorted(AGENTS), help="The coding agent.")
        parser.add_argument("--user", metavar="NAME", help="The user the agent connects as.")
        parser.add_argument("--token", metavar="KEY", help="HTTP: the API token to send.")
        parser.add_argument(
            "--url", metavar="URL", help="HTTP transport: this server's URL (e.g. "
            "http://127.0.0.1:8000); without it, stdio.",
        )  # fmt: skip
        parser.add_argument(
            "--scope", choices=SCOPES, default="user",
            help="user (default): the agent's config in your home; project: the project's.",
        )  # fmt: skip
        parser.add_argument(
            "--project-dir", default=".", metavar="DIR", help="For --scope project (default: .)."
        )
        parser.add_argument("--config", metavar="PATH", help="The MCP config file to use.")
        parser.add_argument(
            "--hooks-settings", metavar="PATH", help="claude-code: the settings file for the hooks."
        )
        parser.add_argument(
            "--name", default=SERVER_NAME, help=f"The server's name (default {SERVER_NAME})."
        )
        parser.add_argument("--no-hooks", action="store_true", help="claude-code: no hooks.")
        parser.add_argument("--write", action="store_true", help="Merge into the files.")
        parser.add_argument(
            "--proxy", action="store_true",
            help="Also send the agent's model calls through this server's drop-in (needs "
            "--url). claude-code: ANTHROPIC_BASE_URL and an X-LCM-Token header in its settings' "
            "env (printed; --write merges). codex: a [model_providers.lcm] table and "
            "model_provider = \"lcm\"; opencode: the openai provider's baseURL and the "
            "X-LCM-Token header (both written at once). docs/agents.md.",
        )  # fmt: skip
        parser.add_argument(
            "--remove", action="store_true",
            help="With --proxy: take the proxy settings out of the agent's config again.",
        )  # fmt: skip
        parser.add_argument(
            "--forward-key", metavar="ENV",
            help="codex --proxy: the variable holding the user's own model key, sent as "
            "Authorization and forwarded upstream (default: the server's keys).",
        )  # fmt: skip

    def handle(self, *args, **options):
        if options["proxy"] or options["remove"]:
            if options["agent"] == "claude-code":
                return self._claude_code_proxy(options)
            return self._proxy(options)
        agent = AGENTS[options["agent"]]
        project = Path(options["project_dir"]).expanduser().resolve()
        path = Path(options["config"]).expanduser() if options["config"] else None
        path = path or agent.path(options["scope"], project)
        target = self._target(options, existing=merge.existing_entry(agent, path, options["name"]))
        entry = agent.entry(target)
        self.stdout.write(f"# {agent.name}: MCP server {options['name']!r} in {path}\n")
        self.stdout.write(merge.render(agent, options["name"], entry))
        hooks = None
        if agent.name == "claude-code" and not options["no_hooks"]:
            hooks = self._hooks(options, target, project)
        if not options["write"]:
            self.stdout.write("# (printed only: --write merges it into the files above)")
            return
        if target.transport == "stdio":
            # The list `lcm_mcp` answers an agent's first tools/list with, before it loads.
            remember_tools(listed_tools())
        try:
            self._report(merge.merge_entry(agent, path, options["name"], entry))
            if agent.name == "codex":
                self._codex_catalog(path)
            if hooks is not None:
                settings, groups = hooks
                self._report(
                    merge.update_json(settings, lambda data: claude_hooks.merge_hooks(data, groups))
                )
        except (ConfigFileError, ValueError) as error:
            raise CommandError(str(error)) from None

    def _proxy(self, options) -> None:
        name = options["agent"]
        if name not in ("codex", "opencode") or not options["proxy"]:
            raise CommandError("--proxy [--remove] is for claude-code, codex and opencode")
        agent = AGENTS[name]
        project = Path(options["project_dir"]).expanduser().resolve()
        path = Path(options["config"]).expanduser() if options["config"] else None
        path = path or agent.path(options["scope"], project)
        try:
            if options["remove"]:
                remove = proxy.codex_remove if name == "codex" else proxy.opencode_remove
                self._report(remove(path))
                return
            if not options["url"]:
                raise CommandError("--proxy needs --url: this server's URL")
            target = self._target(
                {**options, "agent": f"{name} proxy"},
                existing=proxy.existing_token(name, path),
            )
            if name == "codex":
                entry = proxy.codex_provider(
                    target.base_url, target.token, forward_key=options["forward_key"]
                )
                self._report(proxy.codex_merge(path, entry))
            else:
                options_entry = proxy.opencode_options(target.base_url, target.token)
                self._report(proxy.opencode_merge(path, options_entry, new_file=agent.new_file))
        except (ConfigFileError, ValueError) as error:
            raise CommandError(str(error)) from None

    def _codex_catalog(self, config: Path) -> None:
        """The lcm tools on Codex's first turn: its catalog without tool search
        (mcpserver/connect/codex_catalog.py)."""
        catalog = codex_catalog.eager_catalog()
        if catalog is None:
            self.stdout.write(
                "# codex: no `codex` program on PATH gave its model catalog, so its model "
                "catalog was not written: the lcm tools reach the model through Codex's "
                "tool_search (docs/agents.md)"
            )
            return
        written, selected = codex_catalog.catalog_merge(config, catalog)
        self._report(written)
        if selected is None:
            self.stdout.write(
                f"# codex: {codex_catalog.KEY} names a catalog of your own: left as it is"
            )
        else:
            self._report(selected)

    def _claude_code_proxy(self, options) -> None:
        """claude-code --proxy: the env entries in its settings file (user or project)."""
        if not options["proxy"]:
            raise CommandError("--remove goes with --proxy: --proxy --remove")
        project = Path(options["project_dir"]).expanduser().resolve()
        settings = (
            Path(options["hooks_settings"]).expanduser() if options["hooks_settings"] else None
        )
        settings = settings or claude_hooks.settings_path(options["scope"], project)
        if options["remove"]:
            change = claude_proxy.remove_proxy
            self.stdout.write(f"# claude-code: proxy entries out of {settings}\n")
        else:
            if not options["url"]:
                raise CommandError(
                    "--proxy needs --url URL (this server, e.g. http://127.0.0.1:8000)"
                )
            try:
                kept = claude_proxy.token_of(read_json(settings))
            except ConfigFileError as error:
                raise CommandError(str(error)) from None
            existing = {"headers": {"Authorization": f"Bearer {kept}"}} if kept else None
            target = self._target(options, existing=existing)
            base = target.base_url
            preview: dict = {}
            claude_proxy.merge_proxy(preview, base_url=base, token="<token>")
            self.stdout.write(f"# claude-code: proxy in {settings}\n")
            self.stdout.write(json_text(preview))

            def change(data):
                claude_proxy.merge_proxy(data, base_url=base, token=target.token)

        if not options["write"]:
            self.stdout.write("# (printed only: --write merges it into the file above)")
            return
        try:
            self._report(merge.update_json(settings, change))
        except (ConfigFileError, ValueError) as error:
            raise CommandError(str(error)) from None

    def _target(self, options, *, existing: dict | None) -> ServerTarget:
        http = bool(options["url"])
        try:
            base_url = base_url_of(options["url"]) if http else ""
            username, token, issued = owner_and_token(
                agent=options["agent"],
                username=options["user"],
                token=options["token"],
                existing=existing,
                http=http,
            )
        except (CredentialsError, ValueError) as error:
            raise CommandError(str(error)) from None
        if issued:
            self.stderr.write(f"issued API token 'lcm_connect {options['agent']}' for {username}")
        return ServerTarget(
            transport="http" if http else "stdio",
            username=username,
            base_url=base_url,
            token=token,
            env={} if http else passed_env(),
        )

    def _hooks(self, options, target: ServerTarget, project: Path):
        settings = (
            Path(options["hooks_settings"]).expanduser() if options["hooks_settings"] else None
        )
        settings = settings or claude_hooks.settings_path(options["scope"], project)
        groups = claude_hooks.hook_groups(target, options["name"])
        self.stdout.write(f"# claude-code: hooks in {settings}\n")
        self.stdout.write(json_text({"hooks": {k: [v] for k, v in groups.items()}}))
        return settings, groups

    def _report(self, merged: Merged) -> None:
        if not merged.changed:
            self.stdout.write(f"{merged.path}: already up to date (not written)")
        elif merged.backup:
            self.stdout.write(f"{merged.path}: merged (backup: {merged.backup})")
        else:
            self.stdout.write(f"{merged.path}: written (new file)")
