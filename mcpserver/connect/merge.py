"""One server entry into an agent's file (`merge_entry`), the entry as it would be written
(`render`), and the entry already there (`existing_entry`, whose token is reused)."""

from __future__ import annotations

import copy
from pathlib import Path

import tomlkit

from mcpserver.connect.agents import AgentConfig
from mcpserver.connect.config_files import (
    ConfigFileError,
    Merged,
    json_text,
    old_text,
    read_json,
    read_toml,
    table_at,
    write_if_changed,
)


def render(agent: AgentConfig, name: str, entry: dict) -> str:
    """The entry inside its containing keys, in the file's format."""
    wrapped: dict = {name: entry}
    for key in reversed(agent.keys):
        wrapped = {key: wrapped}
    if agent.kind == "toml":
        document = tomlkit.document()
        servers = tomlkit.table(is_super_table=True)
        servers[name] = _toml_table(entry)
        document[agent.keys[0]] = servers
        return tomlkit.dumps(document)
    return json_text(wrapped)


def existing_entry(agent: AgentConfig, path: Path, name: str) -> dict | None:
    try:
        if agent.kind == "toml":
            servers = table_at(read_toml(path), agent.keys, create=False)
            found = servers.get(name) if servers is not None else None
            return found.unwrap() if hasattr(found, "unwrap") else found
        servers = table_at(read_json(path), agent.keys, create=False)
    except ConfigFileError:
        return None
    found = servers.get(name) if servers is not None else None
    return found if isinstance(found, dict) else None


def merge_entry(agent: AgentConfig, path: Path, name: str, entry: dict) -> Merged:
    if agent.kind == "toml":
        return _merge_toml(agent, path, name, entry)
    return merge_json(path, agent.keys, name, entry, new_file=agent.new_file)


def merge_json(
    path: Path, keys: tuple[str, ...], name: str, entry: dict, *, new_file: dict | None = None
) -> Merged:
    before = old_text(path)
    data = read_json(path)
    original = copy.deepcopy(data)
    if before is None:
        data = {**(new_file or {}), **data}
    table_at(data, keys, create=True)[name] = entry
    if before is not None and data == original:
        return Merged(path=path, changed=False, backup=None)
    return write_if_changed(path, before, json_text(data, indent=indent_of(before)))


def update_json(path: Path, change) -> Merged:
    """`change(data)` on the file's object, written when it changed anything."""
    before = old_text(path)
    data = read_json(path)
    original = copy.deepcopy(data)
    change(data)
    if before is not None and data == original:
        return Merged(path=path, changed=False, backup=None)
    return write_if_changed(path, before, json_text(data, indent=indent_of(before)))


def indent_of(text: str | None) -> int | str:
    """The indentation the file already uses (two spaces for a new file)."""
    for line in (text or "").splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2


def _toml_table(entry: dict):
    table = tomlkit.table()
    for key, value in entry.items():
        if isinstance(value, dict):
            inline = tomlkit.inline_table()
            inline.update(value)
            table[key] = inline
        else:
            table[key] = value
    return table


def _merge_toml(agent: AgentConfig, path: Path, name: str, entry: dict) -> Merged:
    before = old_text(path)
    document = read_toml(path)
    servers = table_at(
        document,
        agent.keys,
        create=True,
        new_table=lambda: tomlkit.table(is_super_table=True),
    )
    current = servers.get(name)
    if current is not None and hasattr(current, "unwrap") and current.unwrap() == entry:
        return Merged(path=path, changed=False, backup=None)
    servers[name] = _toml_table(entry)
    return write_if_changed(path, before, tomlkit.dumps(document))
