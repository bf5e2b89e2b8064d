"""`manage.py lcm_mcp --user NAME`: the MCP server over stdio, for desktop agents. Its
handshake is answered before this runs (manage.py, mcpserver/stdio_front.py)."""

from __future__ import annotations

import anyio
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server

from mcpserver.server import build_server, listed_tools
from mcpserver.stdio_front import remember_tools


class Command(BaseCommand):
    help = (
        "Serve the LCM tools (lcm_describe, lcm_grep, lcm_expand, lcm_expand_query, ...) "
        "over the Model Context Protocol on stdin/stdout, as one user. Start it from an "
        "MCP client's configuration (see docs/mcp.md); it runs until stdin closes."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--user",
            required=True,
            metavar="NAME",
            help="Username the tools run as; they see only this user's conversations.",
        )

    def handle(self, *args, **options):
        name = options["user"]
        user = get_user_model().objects.filter(username=name, is_active=True).first()
        if user is None:
            raise CommandError(f"no active user named {name!r}")
        # Kept for the next start's early tools/list, even if this one is stopped before an
        # agent asks (Codex ends a short `exec` before a slow start would answer).
        remember_tools(listed_tools())
        server = build_server(user_id_for=lambda ctx: user.pk, on_tools_listed=remember_tools)

        async def serve() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(serve)
