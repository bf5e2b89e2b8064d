"""When and how long to wait before retrying a provider call (shared by every adapter)."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping

MAX_SLEEP_SECONDS = 30.0
BASE_SLEEP_SECONDS = 1.0


def is_retryable(status_code: int) -> bool:
    """Rate limited (429), overloaded (529) or any other server error (5xx)."""
    return status_code == 429 or status_code >= 500


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """The server's requested wait: `retry-after-ms`, or `retry-after` in seconds or as an
    HTTP date; None when absent or unreadable."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - time.time())


def backoff_seconds(attempt: int, retry_after: float | None) -> float:
    """The server's `retry-after` when given, else 1 s, 2 s, 4 s ... with up to 25 % jitter;
    never more than MAX_SLEEP_SECONDS."""
    if retry_after is not None:
        return min(MAX_SLEEP_SECONDS, retry_after)
    delay = BASE_SLEEP_SECONDS * 2**attempt
    return min(MAX_SLEEP_SECONDS, delay * (1 + random.random() / 4))
