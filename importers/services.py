"""Imports and exports: the entry points the command, the API job and tests call."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from core.api.errors import InvalidInput
from importers.models import Format
from importers.report import ImportReport


def import_file(
    *,
    format: str,
    path: str | Path,
    owner,
    session_id: str | None = None,
    files_dir: str | Path | None = None,
    dry_run: bool = False,
    trust_paths: bool = True,
    advance: Callable[[int], None] | None = None,
    set_total: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import `path` (in `format`) for `owner`; with `dry_run`, count and write nothing.

    `trust_paths=False` for uploads: a lossless-claw database's storage paths are then
    never read (they could name any file of the server)."""
    if format not in Format.values:
        raise InvalidInput(
            f"format {format!r} is not one of: {', '.join(Format.values)}",
            extra={"field": "format"},
        )
    report = ImportReport(format=format, source=str(path), dry_run=dry_run)
    started = time.perf_counter()
    if format == Format.LOSSLESS_CLAW:
        from importers.losslessclaw.importer import import_lossless_claw

        import_lossless_claw(
            path=path,
            owner=owner,
            files_dir=files_dir,
            dry_run=dry_run,
            trust_paths=trust_paths,
            report=report,
            advance=advance,
            set_total=set_total,
        )
    else:
        from importers.transcripts.runner import import_transcript

        import_transcript(
            format=format,
            path=Path(path),
            owner=owner,
            session_id=session_id,
            dry_run=dry_run,
            report=report,
            advance=advance,
            set_total=set_total,
        )
    report.seconds = time.perf_counter() - started
    return report
