"""Retry timing now lives in the provider layer; re-exported for existing imports."""

from providers.retry import (  # noqa: F401
    BASE_SLEEP_SECONDS,
    MAX_SLEEP_SECONDS,
    backoff_seconds,
    is_retryable,
    retry_after_seconds,
)
