"""Turn engine figures for /metrics: counts read from the database at scrape time (so
workers' commits and indexing are exact), plus per-process latency histograms."""

from __future__ import annotations

import threading
from collections import Counter

from django.db.models import Count

from core.metrics import Sample, observe_ms
from turns.models import FINALIZED_PHASES, JobState, TurnJob, UserTurn


def collect():
    phases = dict(UserTurn.objects.values_list("phase").annotate(n=Count("id")))
    yield Sample(
        "lcm_turns",
        "gauge",
        "Turns by lifecycle phase.",
        tuple(({"phase": phase}, float(n)) for phase, n in sorted(phases.items())),
    )
    pending = UserTurn.objects.filter(phase__in=FINALIZED_PHASES, state_after__isnull=True).count()
    yield Sample(
        "lcm_turns_pending",
        "gauge",
        "Turns answered but not yet committed.",
        (({}, float(pending)),),
    )
    index = dict(UserTurn.objects.values_list("index_status").annotate(n=Count("id")))
    yield Sample(
        "lcm_turns_index_status",
        "gauge",
        "Turns by indexing status.",
        tuple(({"status": status}, float(n)) for status, n in sorted(index.items())),
    )
    backlog = dict(
        TurnJob.objects.filter(state__in=[JobState.PENDING, JobState.RUNNING])
        .values_list("job_type")
        .annotate(n=Count("id"))
    )
    yield Sample(
        "lcm_turn_jobs_backlog",
        "gauge",
        "Live turn jobs (pending or running) by type.",
        tuple(({"job_type": kind}, float(n)) for kind, n in sorted(backlog.items())),
    )
    yield from cache_samples()


# Prompt-cache tokens reported by the providers, per process (like the histograms):
# (provider, model, kind) -> tokens, kind "read" or "write".
_cache_tokens: Counter = Counter()
_cache_lock = threading.Lock()


def count_cache_tokens(provider: str, model: str, usage: dict) -> None:
    with _cache_lock:
        for kind, key in (
            ("read", "cache_read_input_tokens"),
            ("write", "cache_creation_input_tokens"),
        ):
            _cache_tokens[(provider, model, kind)] += int(usage.get(key) or 0)


def cache_samples():
    with _cache_lock:
        rows = sorted(_cache_tokens.items())
    yield Sample(
        "lcm_provider_cache_tokens_total",
        "counter",
        "Input tokens the providers reported as read from (kind=read) or written to "
        "(kind=write) their prompt cache, by this process's turn steps.",
        tuple(
            ({"provider": provider, "model": model, "kind": kind}, float(n))
            for (provider, model, kind), n in rows
        ),
    )


def observe_context(ctx) -> None:
    observe_ms(
        "lcm_turn_context_tokens",
        float(ctx.token_total()),
        "Assembled context size per turn (tokens, in the ms-bucket histogram).",
    )


def observe_latency(stage: str, ms: float) -> None:
    """One turn stage's latency: `assemble` (context.context_prepare), `summarize` (the
    librarian and TX-B, jobs.summarize_turn), `index` (TX-C, jobs.index_turn)."""
    observe_ms(
        "lcm_turn_stage_latency_ms",
        ms,
        "Turn stage latency (assemble, summarize, index).",
        stage=stage,
    )
