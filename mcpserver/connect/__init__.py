"""`manage.py lcm_connect`: this server's MCP entry (and Claude Code's hooks) in each coding
agent's own configuration file (docs/capture.md, "Recall from inside every agent")."""
