"""The server's side of `lcm_watch --server`: a mirror of each user's watched files.

A remote watcher sends the bytes it has not sent yet (`append` at the offset it last had
acknowledged, or `replace` for a file rewritten whole), then asks for the changed unit to
be imported from the mirror with the ordinary importer. The mirror keeps the agents'
layout under LCM_DATA_DIR/watch/<user id>/<store>/, so a session and its sub-agent files
import together and the parsers see whole files with the agent's own line numbers.

An `append` whose offset is below the mirror's size (a retry after a lost answer) first
cuts the mirror back to that offset: the watcher's bytes are the file's. One above it is
refused with the mirror's size, so the watcher resends from there; nothing is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from pathlib import Path

from django.conf import settings

from core.api.errors import Conflict, InvalidInput, NotFound
from importers.watch.stores import Store, classify

LABELS = {
    "claude-code": "claude-code",
    "codex/sessions": "codex",
    "codex/archived_sessions": "codex",
    "opencode": "opencode",
    "gemini": "gemini",
}
MODES = ("append", "replace", "delete", "import")
_SAFE = re.compile(r"^[A-Za-z0-9._@+=,~ -]{1,255}$")
# What the API's `path` must look like (a store, then plain names that do not start with
# a dot): the OpenAPI schema states it, and anything else is a 400 before any lookup.
PATH_PATTERN = (
    r"^(claude-code|codex/sessions|codex/archived_sessions|opencode|gemini)"
    r"(/[A-Za-z0-9_@+=,~-][A-Za-z0-9._@+=,~ -]{0,254})+$"
)


def user_root(user) -> Path:
    return Path(settings.DATA_DIR) / "watch" / str(user.pk)


def _resolve(user, relative: str) -> tuple[Store, Path]:
    """The mirror path of `<label>/<rel>`; only names an agent's store would hold."""
    parts = relative.split("/")
    for size in (2, 1):
        label = "/".join(parts[:size])
        if label in LABELS and len(parts) > size:
            rest = parts[size:]
            break
    else:
        raise InvalidInput(
            f"path must start with one of: {', '.join(LABELS)}", extra={"field": "path"}
        )
    if any(p in ("", ".", "..") or p.startswith(".") or not _SAFE.match(p) for p in rest):
        raise InvalidInput("path has a part that is not a plain file name", extra={"field": "path"})
    store = Store(agent=LABELS[label], root=user_root(user) / label, label=label)
    return store, store.root.joinpath(*rest)


@contextlib.contextmanager
def _locked(user):
    root = user_root(user)
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # one writer per user's mirror at a time
        yield


def receive(*, user, relative: str, mode: str, offset: int, data: bytes) -> dict:
    """Store (or import) one piece; returns the mirror file's size and, for `import`, what
    the import added."""
    if mode not in MODES:
        raise InvalidInput(f"mode must be one of: {', '.join(MODES)}", extra={"field": "mode"})
    store, path = _resolve(user, relative)
    if mode == "import":
        return _import(user, store, path)
    watched = classify(path, store)
    if watched is None or path.name.endswith("-wal"):  # a database arrives as one copy
        raise NotFound(f"{relative} is not a session file of {store.agent}")
    with _locked(user):
        if mode == "delete":
            path.unlink(missing_ok=True)
            return {"size": 0}
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode == "replace":
            temporary = path.with_name(f".{path.name}.part")
            temporary.write_bytes(data)
            for log in (f"{path.name}-wal", f"{path.name}-shm"):  # the last copy's, if any
                path.with_name(log).unlink(missing_ok=True)
            os.replace(temporary, path)
            return {"size": len(data)}
        size = path.stat().st_size if path.exists() else 0
        if offset > size:
            raise Conflict(
                f"the mirror holds {size} bytes of {relative}; send from there",
                code="offset_ahead",
                retry_after=0,
                extra={"size": size},
            )
        with path.open("r+b" if path.exists() else "wb") as handle:
            handle.truncate(offset)
            handle.seek(offset)
            handle.write(data)
        return {"size": offset + len(data)}


def _import(user, store: Store, path: Path) -> dict:
    from importers.services import import_file

    is_tree = store.agent == "opencode" and path == store.root / "storage"
    if not is_tree and (classify(path, store) is None or classify(path, store).unit != path):
        raise NotFound(f"{path.name} is not a session the importer reads")
    with _locked(user):
        if not path.exists():
            raise NotFound("that session is not in the mirror yet: send its bytes first")
        try:
            report = import_file(format=store.agent, path=path, owner=user).as_dict()
        except InvalidInput as error:  # e.g. a file rewritten whole, sent mid-save
            raise Conflict(
                f"the mirror's copy cannot be read now ({error.message}): send it again",
                code="not_readable",
                retry_after=0,
            ) from None
    return {
        "size": 0 if is_tree else path.stat().st_size,
        "imported": report["totals"],
        "errors": report["errors"][:100],
        "problems": [p for c in report["conversations"] for p in c["problems"]][:100],
    }
