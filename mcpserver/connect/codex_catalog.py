"""The lcm tools on Codex's first turn.

Codex 0.171 offers an MCP server's tools behind its client-side `tool_search` (deferred
tool discovery) for every model whose catalog entry says `supports_search_tool` (gpt-5.5
and the later ones): the model sees only `tool_search`, so the first turn offers no lcm
tool. Codex has no per-server switch (its `tool_search` and
`tool_search_always_defer_mcp_tools` features are fixed in 0.171); its `model_catalog_json`
setting replaces the bundled model catalog. So `lcm_connect codex --write` writes Codex's
own catalog (`codex debug models`) with `supports_search_tool = false` beside its
config (`lcm-model-catalog.json`) and points `model_catalog_json` at it: every MCP tool is
then sent on every turn (the lcm tools as the namespace `mcp__lcm`). A catalog the user
chose is left alone. The file is a copy of that Codex version's catalog: run the command
again after upgrading Codex (docs/agents.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import tomlkit

from mcpserver.connect.config_files import Merged, old_text, read_toml, write_if_changed

CATALOG_FILE = "lcm-model-catalog.json"
KEY = "model_catalog_json"


def eager_catalog(codex: str | None = None) -> dict | None:
    """Codex's model catalog with tool search off for every model; None when the `codex`
    program is not found or does not give one."""
    program = codex or shutil.which("codex")
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, "debug", "models"],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        catalog = json.loads(done.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    models = catalog.get("models") if isinstance(catalog, dict) else None
    if done.returncode != 0 or not isinstance(models, list):
        return None
    for model in models:
        if isinstance(model, dict):
            model["supports_search_tool"] = False
    return catalog


def catalog_merge(config: Path, catalog: dict) -> tuple[Merged, Merged | None]:
    """(the catalog file, the config's `model_catalog_json`: None when the user set another
    catalog, which is kept)."""
    target = config.parent / CATALOG_FILE
    text = json.dumps(catalog, indent=1) + "\n"
    written = write_if_changed(target, old_text(target), text)
    before = old_text(config)
    document = read_toml(config)
    current = document.get(KEY)
    if current == str(target):
        return written, Merged(path=config, changed=False, backup=None)
    if current is not None:
        return written, None
    document[KEY] = str(target)  # tomlkit places a new top-level key before the tables
    return written, write_if_changed(config, before, tomlkit.dumps(document))
