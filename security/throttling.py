"""Rate limits: per user/token and per client IP on the API, failed sign-ins on the login page.

API: DRF throttles whose rates are read from settings at request time
(`LCM_THROTTLE_USER_RATE` per user/token, `LCM_THROTTLE_IP_RATE` per client IP), so an
empty rate turns one off. A request over its rate gets 429 in the error shape with
`Retry-After` (core/api/errors.py). DRF checks permissions before throttles, so a
request without valid credentials is refused (401) before any throttle sees it:
`AuthFailureThrottleMiddleware` counts those 401s per IP (`LCM_AUTH_FAILURE_RATE`) and
answers 429 to that IP once it is over the rate, which stops token guessing.

Login: `LoginThrottleMiddleware` counts failed POSTs to the sign-in pages (the explorer's
and the admin's) per IP and per
user name (`LCM_LOGIN_FAILURE_RATE`); once either is over the rate, further POSTs get 429
until the window passes. Only failures count, so people who sign in successfully (and
the browser tests) are never slowed down.

Counters live in Django's cache: per process with the default local-memory cache, shared
by every process when `LCM_REDIS_URL` is set (the cache is then Redis, see
lcmsite/settings.py), so N web processes together allow the rate, not N times it. Each
counter is a fixed window (`cache.add` then `cache.incr`, atomic in Redis), so
concurrent requests in several processes never lose a count; a client may burst up to
twice the rate across a window boundary.
"""

from __future__ import annotations

import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from django.shortcuts import resolve_url
from django.urls import reverse
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from core.api.errors import json_error
from security.services import audit_record

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
RATE_SETTINGS = (
    "LCM_THROTTLE_USER_RATE",
    "LCM_THROTTLE_IP_RATE",
    "LCM_AUTH_FAILURE_RATE",
    "LCM_LOGIN_FAILURE_RATE",
)


def parse_rate(rate: str) -> tuple[int, int] | None:
    """'10/min' -> (10, 60); '' -> None (no limit)."""
    if not rate.strip():
        return None
    count, _, period = rate.strip().partition("/")
    if not count.isdigit() or int(count) < 1 or not period or period[0] not in _PERIODS:
        raise ValueError(rate)
    return int(count), _PERIODS[period[0]]


def validate_rates() -> None:
    for name in RATE_SETTINGS:
        value = getattr(settings, name, "")
        try:
            parse_rate(value)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}={value!r} is invalid: expected empty or <count>/<sec|min|hour|day>"
            ) from None


def _window(key: str, window: int, now: float) -> tuple[str, float]:
    """The counter key of the fixed window `now` falls in, and when that window ends."""
    start = int(now // window) * window
    return f"{key}:{start}", start + window


def _hit(key: str, window: int, now: float) -> int:
    """Count one event in the current window; the count so far (atomic per backend)."""
    counter, _ = _window(key, window, now)
    cache.add(counter, 0, timeout=window + 1)
    try:
        return cache.incr(counter)
    except ValueError:  # expired between add and incr
        cache.add(counter, 1, timeout=window + 1)
        return 1


def _seconds_left(window: int, now: float) -> int:
    return max(1, math.ceil(_window("", window, now)[1] - now))


class _SettingsRate:
    """A DRF throttle whose rate is read from a setting, counted in a fixed window of
    the shared cache."""

    setting = ""
    _wait_seconds: int | None = None

    def get_rate(self):
        return getattr(settings, self.setting, "") or None

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        now = time.time()
        if _hit("lcm:rate:" + key, self.duration, now) <= self.num_requests:
            return True
        self._wait_seconds = _seconds_left(self.duration, now)
        return False

    def wait(self):
        return self._wait_seconds


class TokenRateThrottle(_SettingsRate, UserRateThrottle):
    """Per signed-in user (all of the user's tokens together); per IP otherwise."""

    setting = "LCM_THROTTLE_USER_RATE"


class IPRateThrottle(_SettingsRate, AnonRateThrottle):
    """Per client IP, for every request (signed in or not)."""

    setting = "LCM_THROTTLE_IP_RATE"
    scope = "ip"

    def get_cache_key(self, request, view):
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


# Failure counters (login page, API credentials) ------------------------------------------


def _key(kind: str, value: str) -> str:
    return "lcm:auth-failures:" + kind + ":" + hashlib.sha256(value.encode()).hexdigest()[:32]


def _wait(keys: list[str], limit: int, window: int, now: float) -> int | None:
    """Seconds until the current window ends, if any key has used up its limit."""
    full = any((cache.get(_window(key, window, now)[0]) or 0) >= limit for key in keys)
    return _seconds_left(window, now) if full else None


def _count(keys: list[str], window: int, now: float) -> None:
    for key in keys:
        _hit(key, window, now)


def _throttled(wait: int, message: str):
    response = json_error(429, "throttled", message, {"wait": wait})
    response["Retry-After"] = str(wait)
    return response


class AuthFailureThrottleMiddleware:
    """429 for an IP whose API requests keep failing authentication."""

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        rate = parse_rate(settings.LCM_AUTH_FAILURE_RATE)
        if rate is None or not request.path.startswith("/api/"):
            return self.get_response(request)
        limit, window = rate
        now = time.time()
        keys = [_key("api-ip", request.META.get("REMOTE_ADDR") or "")]
        wait = _wait(keys, limit, window, now)
        if wait is not None:
            return _throttled(wait, "too many requests with bad credentials; try again later")
        response = self.get_response(request)
        if response.status_code == 401:
            _count(keys, window, now)
        return response


def _login_paths() -> set[str]:
    """The sign-in pages: the explorer's and the admin's."""
    return {resolve_url(settings.LOGIN_URL), reverse("admin:login")}


class LoginThrottleMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if request.method != "POST" or request.path not in _login_paths():
            return self.get_response(request)
        rate = parse_rate(settings.LCM_LOGIN_FAILURE_RATE)
        if rate is None:
            return self.get_response(request)
        limit, window = rate
        now = time.time()
        keys = [_key("ip", request.META.get("REMOTE_ADDR") or "")]
        username = (request.POST.get("username") or "").strip().lower()
        if username:
            keys.append(_key("user", username))
        wait = _wait(keys, limit, window, now)
        if wait is not None:
            audit_record(action="login_throttled", via="page", request=request)
            return _throttled(wait, "too many failed sign-ins; try again later")
        response = self.get_response(request)
        # Django's LoginView re-renders the form (200) on a failure and redirects on success.
        if response.status_code == 200:
            _count(keys, window, now)
        return response
