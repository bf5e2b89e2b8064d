"""The agent's model calls through this server's drop-in (`lcm_connect AGENT --proxy`), as
the agents document their provider settings:

- Codex: a `[model_providers.lcm]` table in `$CODEX_HOME/config.toml` (base URL
  `URL/openai/v1`, `wire_api = "responses"`, the LCM token in `http_headers` as
  `X-LCM-Token`; with `--forward-key ENV`, `env_key = ENV`: the user's own key goes in
  `Authorization` to the upstream), selected by the top-level `model_provider = "lcm"`.
- OpenCode: the built-in `openai` provider's `options.baseURL` and `options.headers` in its
  `opencode.json`, so its OpenAI models are served through the drop-in.

Only these keys are written; `--remove` takes them out again (and `model_provider` only
when it still names ours). Every write backs the file up first (config_files.py).
"""

from __future__ import annotations

import copy
from pathlib import Path

import tomlkit

from mcpserver.connect.config_files import (
    ConfigFileError,
    Merged,
    json_text,
    old_text,
    read_json,
    read_toml,
    write_if_changed,
)
from mcpserver.connect.merge import indent_of

PROVIDER = "lcm"
TOKEN_HEADER = "X-LCM-Token"
DROPIN_PATH = "/openai/v1"


def codex_provider(base_url: str, token: str, *, forward_key: str | None = None) -> dict:
    entry: dict = {
        "name": "LCM (lossless context)",
        "base_url": base_url.rstrip("/") + DROPIN_PATH,
        "wire_api": "responses",
        "http_headers": {TOKEN_HEADER: token},
    }
    if forward_key:
        entry["env_key"] = forward_key
    return entry


def codex_merge(path: Path, entry: dict) -> Merged:
    before = old_text(path)
    document = read_toml(path)
    providers = document.get("model_providers")
    if providers is None:
        providers = tomlkit.table(is_super_table=True)
        document["model_providers"] = providers
    current = providers.get(PROVIDER)
    unchanged = current is not None and current.unwrap() == entry
    if unchanged and document.get("model_provider") == PROVIDER:
        return Merged(path=path, changed=False, backup=None)
    table = tomlkit.table()
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table[key] = inline
        else:
            table[key] = value
    providers[PROVIDER] = table
    _select(document)
    return write_if_changed(path, before, tomlkit.dumps(document))


def _select(document) -> None:
    """`model_provider = "lcm"` (tomlkit places a new top-level key before the tables)."""
    document["model_provider"] = PROVIDER


def existing_token(agent: str, path: Path) -> dict | None:
    """The token an earlier --proxy wrote, as an entry `owner_and_token` reuses (so running
    the command again does not revoke it)."""
    try:
        if agent == "codex":
            entry = (read_toml(path).get("model_providers") or {}).get(PROVIDER)
            headers = entry.unwrap().get("http_headers") if entry is not None else None
        else:
            options = ((read_json(path).get("provider") or {}).get("openai") or {}).get("options")
            headers = (options or {}).get("headers")
    except ConfigFileError:
        return None
    token = (headers or {}).get(TOKEN_HEADER) if isinstance(headers, dict) else None
    return {"headers": {"Authorization": f"Bearer {token}"}} if token else None


def codex_remove(path: Path) -> Merged:
    before = old_text(path)
    if before is None:
        return Merged(path=path, changed=False, backup=None)
    document = read_toml(path)
    changed = False
    providers = document.get("model_providers")
    if providers is not None and PROVIDER in providers:
        del providers[PROVIDER]
        if not providers:
            del document["model_providers"]
        changed = True
    if document.get("model_provider") == PROVIDER:
        del document["model_provider"]
        changed = True
    if not changed:
        return Merged(path=path, changed=False, backup=None)
    # The blank line that stood before the removed table goes with it.
    return write_if_changed(path, before, tomlkit.dumps(document).rstrip("\n") + "\n")


def opencode_options(base_url: str, token: str) -> dict:
    return {"baseURL": base_url.rstrip("/") + DROPIN_PATH, "headers": {TOKEN_HEADER: token}}


def opencode_merge(path: Path, options: dict, *, new_file: dict) -> Merged:
    return _update_opencode(path, lambda found: found.update(copy.deepcopy(options)), new_file)


def opencode_remove(path: Path) -> Merged:
    def drop(found: dict) -> None:
        found.pop("baseURL", None)
        headers = found.get("headers")
        if isinstance(headers, dict):
            headers.pop(TOKEN_HEADER, None)
            if not headers:
                found.pop("headers")

    return _update_opencode(path, drop, None)


def _update_opencode(path: Path, change, new_file: dict | None) -> Merged:
    before = old_text(path)
    if before is None and new_file is None:
        return Merged(path=path, changed=False, backup=None)
    data = read_json(path)
    original = copy.deepcopy(data)
    if before is None:
        data = {**(new_file or {}), **data}
    provider = data.setdefault("provider", {}).setdefault("openai", {})
    change(provider.setdefault("options", {}))
    if not provider["options"]:
        provider.pop("options")
    if not provider:
        data["provider"].pop("openai")
    if not data["provider"]:
        data.pop("provider")
    if before is not None and data == original:
        return Merged(path=path, changed=False, backup=None)
    return write_if_changed(path, before, json_text(data, indent=indent_of(before)))
