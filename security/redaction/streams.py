"""Step "streams": the stream journals of the scope's provider steps and the event logs
of its turns, scrubbed line by line (each JSON line's strings; a line that is not JSON,
such as a torn tail, as text) and written back where they live, encrypted line by line
again when they were. A secret split across two streamed deltas is not one string in
any line and is not matched here (the step's stored response is)."""

from __future__ import annotations

import json

from django.db.models import Q

from core import crypto
from security.hard_delete import stream_paths
from security.redaction.context import JobContext


def _scrub_line(raw: bytes, ctx: JobContext) -> tuple[bytes, int]:
    encrypted = bool(raw.strip()) and not raw.lstrip().startswith(b"{")
    try:
        clear = crypto.decrypt_line(raw) if encrypted else raw
    except ValueError:
        return raw, 0
    text = clear.decode(errors="replace")
    try:
        new, count = ctx.matcher.sub_value(json.loads(text))
        out = json.dumps(new, ensure_ascii=False, separators=(",", ":")) if count else text
    except ValueError:
        out, count = ctx.matcher.sub(text)
    if not count:
        return raw, 0
    return (crypto.encrypt_line(out.encode()) if encrypted else out.encode()), count


def scrub_file(path, ctx: JobContext, *, dry: bool = False) -> int:
    from turns import journal_store

    try:
        data = journal_store.read_bytes(path)
    except FileNotFoundError:
        return 0
    lines, total = [], 0
    for raw in data.split(b"\n"):
        new, count = _scrub_line(raw, ctx)
        lines.append(new)
        total += count
    if total and not dry:
        journal_store.write_bytes(path, b"\n".join(lines))
    return total


def paths_of(ctx: JobContext) -> list:
    """The journals of the scope's provider steps and the event logs of its turns."""
    from turns.models import ProviderStep, UserTurn

    turns = UserTurn.objects.filter(
        Q(session_id__in=ctx.row.session_ids)
        | Q(branch__conversation_id__in=ctx.row.conversation_ids)
    )
    steps = ProviderStep.objects.filter(turn__in=turns)
    return stream_paths(
        {
            ProviderStep: set(steps.values_list("pk", flat=True)),
            UserTurn: set(turns.values_list("pk", flat=True)),
        }
    )


def run(ctx: JobContext) -> dict:
    counts = {"journals": 0, "matches": 0}
    for path in paths_of(ctx):
        found = scrub_file(path, ctx)
        if found:
            counts["journals"] += 1
            counts["matches"] += found
    return counts
