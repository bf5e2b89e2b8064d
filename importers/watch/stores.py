"""Where each agent keeps its sessions, and which files there `lcm_watch` follows.

A *store* is one folder of one agent. Each file found in it is a `Watched` file: its
format, whether it grows by appended lines (`append`: read from a stored offset) or is
rewritten whole (`whole`: re-read when its size, time or inode changes), and the *unit*
that must be imported when it changes (a Claude Code sub-agent file is imported with its
session file; every file of OpenCode's `storage/` tree with the tree).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

AGENTS = ("claude-code", "codex", "opencode", "gemini")
APPEND, WHOLE = "append", "whole"


@dataclass(frozen=True)
class Store:
    agent: str
    root: Path
    label: str  # the store's name in a remote server's mirror: "codex/sessions"


@dataclass(frozen=True)
class Watched:
    path: Path
    store: Store
    kind: str  # APPEND or WHOLE
    unit: Path  # what is imported when this file changes

    @property
    def agent(self) -> str:
        return self.store.agent

    def relative(self, path: Path | None = None) -> str:
        """`path` (default: this file) as the remote mirror names it: `<label>/<rel>`."""
        return f"{self.store.label}/{(path or self.path).relative_to(self.store.root).as_posix()}"


def default_roots(env: dict | None = None) -> dict[str, list[Path]]:
    """Each agent's session folders, honouring the agents' own variables."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    claude = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    codex = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    data = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    return {
        "claude-code": [claude / "projects"],
        "codex": [codex / "sessions", codex / "archived_sessions"],
        "opencode": [data / "opencode"],
        "gemini": [home / ".gemini" / "tmp"],
    }


def make_stores(roots: dict[str, list[Path]]) -> list[Store]:
    stores = []
    for agent, folders in roots.items():
        for folder in folders:
            label = agent  # the remote mirror's name for the store (importers/watch/mirror.py)
            if agent == "codex":
                archived = Path(folder).name == "archived_sessions"
                label = "codex/archived_sessions" if archived else "codex/sessions"
            root = Path(folder).expanduser().resolve()
            stores.append(Store(agent=agent, root=root, label=label))
    return stores


def classify(path: Path, store: Store) -> Watched | None:
    """The file as `lcm_watch` follows it, or None when it is none of the agent's."""
    try:
        parts = path.relative_to(store.root).parts
    except ValueError:
        return None
    if not parts or any(p.startswith(".") for p in parts):
        return None
    return _CLASSIFIERS[store.agent](path, parts, store)


def _claude_code(path: Path, parts: tuple, store: Store) -> Watched | None:
    if path.suffix != ".jsonl":
        return None
    if len(parts) == 4 and parts[2] == "subagents":  # <project>/<session>/subagents/agent-x
        unit = store.root / parts[0] / f"{parts[1]}.jsonl"
        return Watched(path, store, APPEND, unit)
    if len(parts) != 2:
        return None
    if path.name.startswith("agent-"):  # the older layout: beside its session file
        from importers.transcripts.claude_code import _first_session

        session = _first_session(path) if path.exists() else None
        unit = path.parent / f"{session}.jsonl" if session else path  # unknown yet: itself
        return Watched(path, store, APPEND, unit)
    return Watched(path, store, APPEND, path)


def _codex(path: Path, parts: tuple, store: Store) -> Watched | None:
    if not path.name.startswith("rollout-"):
        return None
    if path.name.endswith(".jsonl"):
        return Watched(path, store, APPEND, path)
    if path.name.endswith(".jsonl.zst"):
        return Watched(path, store, WHOLE, path)
    return None


def _opencode(path: Path, parts: tuple, store: Store) -> Watched | None:
    if parts == ("opencode.db",):
        return Watched(path, store, WHOLE, path)
    if parts in (("opencode.db-wal",),):  # the database's write-ahead log: the db changed
        return Watched(path, store, WHOLE, store.root / "opencode.db")
    in_tree = len(parts) >= 3 and parts[0] == "storage" and parts[1] in _OPENCODE_TREES
    if in_tree and path.suffix == ".json":
        return Watched(path, store, WHOLE, store.root / "storage")
    return None


_OPENCODE_TREES = {"session", "message", "part"}


def _gemini(path: Path, parts: tuple, store: Store) -> Watched | None:
    # <project>/chats/session-<time>-<id>.json[l]; a sub-agent's <project>/chats/<parent>/<id>.jsonl
    subagent = len(parts) == 4 and parts[1] == "chats"
    main = len(parts) == 3 and parts[1] == "chats" and path.name.startswith("session-")
    if not (main or subagent):
        return None
    if path.suffix == ".json":
        return Watched(path, store, WHOLE, path)
    if path.suffix == ".jsonl":
        return Watched(path, store, APPEND, path)
    return None


_CLASSIFIERS = {
    "claude-code": _claude_code,
    "codex": _codex,
    "opencode": _opencode,
    "gemini": _gemini,
}


def discover(store: Store) -> list[Watched]:
    """Every file of the store `lcm_watch` follows (nothing when the folder is missing)."""
    if not store.root.is_dir():
        return []
    found = []
    for folder, dirs, files in os.walk(store.root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            watched = classify(Path(folder) / name, store)
            if watched is not None:
                found.append(watched)
    return found
