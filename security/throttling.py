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
the browser tests) are never slowed down. Counters live in Django's cache: per process
with the default local-memory cache, shared when a shared cache is configured.
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


class _SettingsRate:
    setting = ""

    def get_rate(self):
        return getattr(settings, self.setting, "") or None


class TokenRateThrottle(_SettingsRate, UserRateThrottle):
    """Per signed-in user, which is per API token (one token per user); per IP otherwise."""

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


def _recent(key: str, window: int, now: float) -> list[float]:
    return [t for t in cache.get(key, []) if t > now - window]


def _wait(keys: list[str], limit: int, window: int, now: float) -> int | None:
    """Seconds until the oldest counted failure leaves the window, if any key is full."""
    waits = []
    for key in keys:
        history = _recent(key, window, now)
        if len(history) >= limit:
            waits.append(history[0] + window - now)
    return max(1, math.ceil(max(waits))) if waits else None


def _count(keys: list[str], window: int, now: float) -> None:
    for key in keys:
        cache.set(key, [*_recent(key, window, now), now], window)


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
