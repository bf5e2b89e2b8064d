"""Who may read /metrics: clients from `LCM_METRICS_ALLOWED_NETWORKS` (default loopback
only), or anyone presenting `Authorization: Bearer <LCM_METRICS_TOKEN>` when that is set.
Anyone else gets 403 in the error shape. The trade-offs are in docs/deploy.md."""

from __future__ import annotations

import hmac
import ipaddress
from functools import wraps

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.api.errors import json_error


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for part in settings.LCM_METRICS_ALLOWED_NETWORKS.split(","):
        if part.strip():
            networks.append(ipaddress.ip_network(part.strip(), strict=False))
    return networks


def validate_metrics_guard() -> None:
    try:
        allowed_networks()
    except ValueError as exc:
        raise ImproperlyConfigured(
            f"LCM_METRICS_ALLOWED_NETWORKS={settings.LCM_METRICS_ALLOWED_NETWORKS!r} is "
            f"invalid: {exc} (expected comma-separated networks such as 127.0.0.0/8,::1/128)"
        ) from None


def _has_token(request) -> bool:
    expected = settings.LCM_METRICS_TOKEN
    if not expected:
        return False
    keyword, _, given = request.META.get("HTTP_AUTHORIZATION", "").strip().partition(" ")
    return keyword.lower() == "bearer" and hmac.compare_digest(given.strip(), expected)


def _from_allowed_network(request) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR") or "")
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in allowed_networks())


def metrics_allowed(request) -> bool:
    return _has_token(request) or _from_allowed_network(request)


def metrics_guard(view):
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not metrics_allowed(request):
            response = json_error(
                403,
                "forbidden",
                "metrics are readable from LCM_METRICS_ALLOWED_NETWORKS or with "
                "'Authorization: Bearer <LCM_METRICS_TOKEN>'",
            )
            if settings.LCM_METRICS_TOKEN:
                response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
        return view(request, *args, **kwargs)

    return guarded
