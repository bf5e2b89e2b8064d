"""Merging one entry into an agent's configuration file, touching nothing else.

JSON files (Claude Code, OpenCode, Gemini CLI) keep their other keys and their key order;
TOML (Codex) goes through tomlkit, which keeps comments and formatting. A file that
changes is first copied beside itself (`NAME.lcm-backup-YYYYMMDDTHHMMSSZ`), then replaced
atomically (written to a temporary file in the same directory, then renamed). A file that
would not change is not written at all: running the command again is a no-op.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import tomlkit


class ConfigFileError(Exception):
    """The file cannot be merged into (not JSON/TOML, or a key holds the wrong type)."""


@dataclass(frozen=True)
class Merged:
    path: Path
    changed: bool
    backup: Path | None


def read_json(path: Path) -> dict:
    if not path.exists() or not path.read_text().strip():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigFileError(
            f"{path} is not plain JSON ({error.msg} at line {error.lineno}); a file with "
            "comments (JSONC) is left alone: add the entry printed above by hand"
        ) from None
    if not isinstance(data, dict):
        raise ConfigFileError(f"{path} does not hold a JSON object")
    return data


def read_toml(path: Path) -> tomlkit.TOMLDocument:
    if not path.exists():
        return tomlkit.document()
    try:
        return tomlkit.parse(path.read_text())
    except tomlkit.exceptions.ParseError as error:
        raise ConfigFileError(f"{path} is not valid TOML: {error}") from None


def table_at(document, keys: tuple[str, ...], *, create: bool, new_table=dict):
    """The mapping at `keys` inside `document` (created empty when missing and `create`)."""
    node = document
    for key in keys:
        child = node.get(key)
        if child is None:
            if not create:
                return None
            child = new_table()
            node[key] = child
        if not hasattr(child, "keys"):
            raise ConfigFileError(f"{'.'.join(keys)} is not a table/object in the file")
        node = child
    return node


def write_if_changed(path: Path, old_text: str | None, new_text: str) -> Merged:
    if old_text == new_text:
        return Merged(path=path, changed=False, backup=None)
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if old_text is not None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        backup = path.with_name(f"{path.name}.lcm-backup-{stamp}")
        shutil.copy2(path, backup)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(new_text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return Merged(path=path, changed=True, backup=backup)


def json_text(data: dict, indent: int | str = 2) -> str:
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


def old_text(path: Path) -> str | None:
    return path.read_text() if path.exists() else None
