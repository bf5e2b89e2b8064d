"""The call timeline's chart: one column per model call, drawn as SVG by the template from
the geometry computed here (no script, no charting library; the explorer's CSP allows
no inline style, so heights and positions are SVG attributes).

Top band: input tokens, split into the part read from the provider's cache and the rest,
with output tokens beside; bottom band: latency. Each column carries its figures in a
<title> for the pointer."""

from __future__ import annotations

from dataclasses import dataclass

WIDTH = 900
TOKENS_HEIGHT = 140
LATENCY_HEIGHT = 60
GAP = 2


@dataclass
class Column:
    receipt_id: str
    x: float
    width: float
    cached_y: float
    cached_h: float
    uncached_y: float
    uncached_h: float
    output_y: float
    output_h: float
    latency_y: float
    latency_h: float
    title: str


def _input_total(r) -> int:
    """All input tokens of the call, whatever the wire counts as input: Anthropic's input
    excludes the cached reads and writes, OpenAI's includes the reads."""
    base = r.input_tokens or 0
    if r.wire.startswith("openai"):
        return base
    return base + (r.cache_read_tokens or 0) + (r.cache_write_tokens or 0)


def cache_share(r) -> float | None:
    total = _input_total(r)
    return None if not total else (r.cache_read_tokens or 0) / total


def columns(receipts: list) -> list[Column]:
    if not receipts:
        return []
    step = WIDTH / len(receipts)
    width = max(1.0, step - GAP)
    top = max([_input_total(r) + (r.output_tokens or 0) for r in receipts] + [1])
    slowest = max([r.latency_ms or 0 for r in receipts] + [1])
    out = []
    for n, r in enumerate(receipts):
        total = _input_total(r)
        cached = min(total, r.cache_read_tokens or 0)
        scale = TOKENS_HEIGHT / top
        cached_h = cached * scale
        uncached_h = (total - cached) * scale
        output_h = (r.output_tokens or 0) * scale
        latency_h = (r.latency_ms or 0) / slowest * LATENCY_HEIGHT
        share = cache_share(r)
        out.append(
            Column(
                receipt_id=r.id,
                x=round(n * step, 2),
                width=round(width, 2),
                cached_y=round(TOKENS_HEIGHT - cached_h, 2),
                cached_h=round(cached_h, 2),
                uncached_y=round(TOKENS_HEIGHT - cached_h - uncached_h, 2),
                uncached_h=round(uncached_h, 2),
                output_y=round(TOKENS_HEIGHT - cached_h - uncached_h - output_h, 2),
                output_h=round(output_h, 2),
                latency_y=round(TOKENS_HEIGHT + 10 + LATENCY_HEIGHT - latency_h, 2),
                latency_h=round(latency_h, 2),
                title=(
                    f"#{n + 1} {r.site} {r.model}: {total} in ({cached} from cache"
                    f"{'' if share is None else f', {share:.0%}'}), {r.output_tokens or 0} out, "
                    f"{'' if r.cost_usd is None else f'${r.cost_usd:.4f}, '}"
                    f"{0 if r.latency_ms is None else round(r.latency_ms)} ms"
                ),
            )
        )
    return out
