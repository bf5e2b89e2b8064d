#!/usr/bin/env python
"""Django's command-line utility for the LCM server."""

import os
import sys

# Commands of the benchmarks app, installed only for them (lcmsite/settings.py).
BENCHMARK_COMMANDS = ("lcm_bench", "lcm_eval")


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lcmsite.settings")
    if sys.argv[1:2] == ["lcm_mcp"] and not {"-h", "--help"} & set(sys.argv):
        # The MCP handshake answered before Django loads (mcpserver/stdio_front.py).
        from mcpserver.stdio_front import answer_initialize_early

        answer_initialize_early()
    if sys.argv[1:2] and sys.argv[1] in BENCHMARK_COMMANDS:
        os.environ["LCM_BENCHMARKS_APP"] = "1"
    from django.core.exceptions import ImproperlyConfigured

    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad LCM_* value: say which and stop, without a traceback.
        print(f"configuration error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
