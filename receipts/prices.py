"""The configured price table (LCM_RECEIPT_PRICES) and a call's cost by it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings

from providers.caching import READ_MULTIPLIER, WRITE_MULTIPLIER


@dataclass(frozen=True)
class Price:
    input: float  # USD per million tokens
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


@lru_cache(maxsize=8)
def parse_prices(table: str) -> tuple[tuple[str, Price], ...]:
    """`prefix=in/out[/read[/write]]; ...`, longest prefix first. Raises ValueError."""
    entries = []
    for entry in filter(None, (e.strip() for e in table.split(";"))):
        prefix, _, numbers = entry.partition("=")
        values = [float(v) for v in numbers.split("/")]
        if not prefix.strip() or not 2 <= len(values) <= 4 or min(values) < 0:
            raise ValueError(f"price entry {entry!r}: expected prefix=input/output[/read[/write]]")
        entries.append((prefix.strip(), Price(*values)))
    return tuple(sorted(entries, key=lambda e: -len(e[0])))


def price_for(model: str) -> Price | None:
    for prefix, price in parse_prices(getattr(settings, "LCM_RECEIPT_PRICES", "") or ""):
        if model.startswith(prefix):
            return price
    return None


def cost_usd(*, model: str, wire: str, usage: dict, cache_ttl: str = "5m") -> float | None:
    """The call's cost; None without a price or without usage. Anthropic's input tokens
    exclude the cached ones; OpenAI's include the cached reads."""
    price = price_for(model)
    if price is None or not usage or usage.get("input_tokens") is None:
        return None
    read = usage.get("cache_read_input_tokens") or 0
    written = usage.get("cache_creation_input_tokens") or 0
    uncached = usage["input_tokens"] - (read if wire.startswith("openai") else 0)
    read_price = price.cache_read if price.cache_read is not None else price.input * READ_MULTIPLIER
    write_price = (
        price.cache_write
        if price.cache_write is not None
        else price.input * WRITE_MULTIPLIER.get(cache_ttl, 1.25)
    )
    total = (
        max(0, uncached) * price.input
        + read * read_price
        + written * write_price
        + (usage.get("output_tokens") or 0) * price.output
    )
    return round(total / 1_000_000, 8)
