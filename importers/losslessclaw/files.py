"""Finding the bytes of a lossless-claw large file: its storage path, or the same relative
path under a files directory (users move their databases), never outside that directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class FileBytes:
    data: bytes | None
    found_at: str = ""


def _inside(base: Path, relative: Path) -> Path | None:
    """`base / relative` if it stays inside `base` (no `..`, no absolute part)."""
    if relative.is_absolute() or ".." in relative.parts:
        return None
    candidate = (base / relative).resolve()
    return candidate if candidate.is_relative_to(base.resolve()) else None


def resolve_file(
    uri: str, *, db_path: Path, files_dir: Path | None, trust_paths: bool = True
) -> FileBytes:
    """Bytes of a stored file: at its storage path, else at the same path relative to the
    files directory (the part after `lcm-files/`, else `<conversation>/<name>`, else the
    name), trying `--files-dir` first and then `lcm-files/` beside the database.

    With `trust_paths=False` (an uploaded database: its paths are whatever the uploader
    wrote) neither the storage path nor the database's folder is read, only `files_dir`,
    and never outside it."""
    path = Path(uri.removeprefix("file://"))
    candidates = [path] if trust_paths else []
    parts = path.parts
    relatives = []
    if "lcm-files" in parts:
        relatives.append(Path(*parts[len(parts) - parts[::-1].index("lcm-files") :]))
    if len(parts) >= 2:
        relatives.append(Path(*parts[-2:]))
    relatives.append(Path(path.name))
    bases = [files_dir, db_path.parent / "lcm-files"] if trust_paths else [files_dir]
    for base in bases:
        if base is None:
            continue
        candidates.extend(c for r in relatives if (c := _inside(base, r)) is not None)
    for candidate in candidates:
        try:
            if candidate.is_file():
                return FileBytes(candidate.read_bytes(), str(candidate))
        except OSError:
            continue
    return FileBytes(None)
