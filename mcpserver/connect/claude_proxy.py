"""Claude Code through this server's Anthropic drop-in (docs/agents.md, "Proxy"): two
entries of the `env` table of its settings file, `ANTHROPIC_BASE_URL` (this server's
`/anthropic`) and an `X-LCM-Token: <token>` line in `ANTHROPIC_CUSTOM_HEADERS` (which
holds one `Name: value` header a line). The user's own Anthropic credential (key or
login) stays where it is and is forwarded upstream unchanged.

Merged, never clobbered: other env entries and other custom header lines are kept;
`remove_proxy` takes out only what `merge_proxy` put in."""

from __future__ import annotations

BASE_URL = "ANTHROPIC_BASE_URL"
HEADERS = "ANTHROPIC_CUSTOM_HEADERS"
TOKEN_HEADER = "X-LCM-Token"
SUFFIX = "/anthropic"


def _lines(value) -> list[str]:
    return [line for line in str(value or "").splitlines() if line.strip()]


def _without_token(lines: list[str]) -> list[str]:
    return [line for line in lines if line.split(":", 1)[0].strip().lower() != "x-lcm-token"]


def _env(settings: dict) -> dict:
    env = settings.setdefault("env", {})
    if not isinstance(env, dict):
        raise ValueError("the settings file's `env` is not an object")
    return env


def merge_proxy(settings: dict, *, base_url: str, token: str) -> None:
    """Point Claude Code at `base_url`'s drop-in as the user owning `token` (in place)."""
    env = _env(settings)
    env[BASE_URL] = base_url.rstrip("/") + SUFFIX
    lines = _without_token(_lines(env.get(HEADERS))) + [f"{TOKEN_HEADER}: {token}"]
    env[HEADERS] = "\n".join(lines)


def remove_proxy(settings: dict) -> None:
    """Take out what `merge_proxy` put in (a base URL of another gateway is left alone)."""
    env = settings.get("env")
    if not isinstance(env, dict):
        return
    if str(env.get(BASE_URL, "")).rstrip("/").endswith(SUFFIX):
        del env[BASE_URL]
    if HEADERS in env:
        lines = _without_token(_lines(env[HEADERS]))
        if lines:
            env[HEADERS] = "\n".join(lines)
        else:
            del env[HEADERS]
    if not env:
        del settings["env"]


def token_of(settings: dict) -> str | None:
    """The X-LCM-Token already in the settings (kept while it still works)."""
    env = settings.get("env")
    if not isinstance(env, dict):
        return None
    for line in _lines(env.get(HEADERS)):
        name, _, value = line.partition(":")
        if name.strip().lower() == "x-lcm-token" and value.strip():
            return value.strip()
    return None
