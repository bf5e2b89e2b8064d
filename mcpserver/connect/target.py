"""How an agent reaches this server: `ServerTarget`, stdio or Streamable HTTP.

stdio: the agent starts `python manage.py lcm_mcp --user NAME` itself, with the settings
that point it at this server's database (LCM_DATA_DIR, LCM_DATABASE_URL, LCM_CONFIG_FILE,
as set where lcm_connect runs). HTTP: the agent connects to `URL/mcp/` with the user's
API token as a bearer token.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

MANAGE_PY = Path(__file__).resolve().parents[2] / "manage.py"
# The settings a child process needs to open the same database as this one.
PASSED_ENV = ("LCM_DATA_DIR", "LCM_DATABASE_URL", "LCM_CONFIG_FILE")
MCP_PATH = "/mcp/"


@dataclass(frozen=True)
class ServerTarget:
    transport: str  # "stdio" or "http"
    username: str = ""
    base_url: str = ""  # http: the server, without /mcp/
    token: str = ""
    env: dict[str, str] = field(default_factory=dict)

    @property
    def mcp_url(self) -> str:
        return self.base_url.rstrip("/") + MCP_PATH

    @property
    def authorization(self) -> str:
        return f"Bearer {self.token}"

    def manage(self, *args: str) -> list[str]:
        """A manage.py command line of this checkout, run by this Python."""
        return [sys.executable, str(MANAGE_PY), *args]

    def stdio_command(self) -> list[str]:
        return self.manage("lcm_mcp", "--user", self.username)

    def shell(self, *args: str) -> str:
        """A manage.py command as one shell line (hooks are shell commands), settings first."""
        return self.shell_line(self.manage(*args))

    def shell_line(self, command: list[str]) -> str:
        """`command` as one shell line, with the settings that open this server's database."""
        settings = [f"{k}={v}" for k, v in self.env.items()]
        return shlex.join((["env", *settings] if settings else []) + command)


def base_url_of(url: str) -> str:
    """The server's base URL from what the user typed (with or without /mcp/)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--url must be an http(s) URL, got {url!r}")
    path = parts.path.rstrip("/")
    if path.endswith("/mcp"):
        path = path[: -len("/mcp")]
    return f"{parts.scheme}://{parts.netloc}{path}"


def passed_env() -> dict[str, str]:
    return {name: os.environ[name] for name in PASSED_ENV if os.environ.get(name)}
