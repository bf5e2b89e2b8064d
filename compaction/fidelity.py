"""Fidelity bookkeeping for the engine: the handles of a pass's sources and the
`SummaryFidelity` row written with its summary (docs/compaction.md, "Fidelity")."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from compaction.models import SummaryFidelity
from compaction.summarizers.base import Handles, SourceItem
from compaction.summarizers.fidelity import Fidelity, measure
from compaction.summarizers.handles import count, draw_handles
from conversations.models import Summary
from core import metrics


@dataclass
class Drawn:
    handles: Handles
    seconds: float


def leaf_handles(sources: Sequence[SourceItem]) -> Drawn:
    started = time.perf_counter()
    handles = draw_handles(sources)
    return Drawn(handles, time.perf_counter() - started)


def condensed_handles(sources: Sequence[SourceItem]) -> Drawn:
    """The children's stored handles (their own text's for a child written before fidelity
    was measured, or by an import)."""
    started = time.perf_counter()
    stored = dict(
        SummaryFidelity.objects.filter(summary_id__in=[s.ref for s in sources]).values_list(
            "summary_id", "handles"
        )
    )
    handles = draw_handles(sources, carried=[stored.get(s.ref) for s in sources])
    return Drawn(handles, time.perf_counter() - started)


@dataclass
class Measured:
    fidelity: Fidelity
    handles: Handles
    path: str
    seconds: float


def measure_summary(content: str, drawn: Drawn, path: str) -> Measured:
    started = time.perf_counter()
    fidelity = measure(content, drawn.handles)
    return Measured(fidelity, drawn.handles, path, drawn.seconds + time.perf_counter() - started)


def record(row: Summary, measured: Measured) -> SummaryFidelity:
    """In the apply's transaction: the summary's fidelity row, and the metrics."""
    fidelity = measured.fidelity
    metrics.observe_ms(
        "lcm_summary_fidelity_measure_ms",
        measured.seconds * 1000,
        "Drawing a pass's handles and measuring its summary, in ms.",
    )
    return SummaryFidelity.objects.create(
        summary=row,
        score=fidelity.score,
        handle_count=count(measured.handles),
        kept=fidelity.kept,
        dropped=fidelity.dropped,
        handles=measured.handles,
        path=measured.path,
        measure_ms=round(measured.seconds * 1000, 3),
    )
