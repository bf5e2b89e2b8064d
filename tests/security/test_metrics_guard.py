"""/metrics answers the allowed networks (loopback by default) and the bearer token, and
refuses everyone else with 403 in the error shape."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from security.metrics_guard import validate_metrics_guard

pytestmark = pytest.mark.django_db


def _get(client, address: str, **headers):
    return client.get("/metrics", REMOTE_ADDR=address, **headers)


def test_loopback_reads_metrics_by_default(client):
    for address in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
        response = _get(client, address)
        assert response.status_code == 200, address
        assert response["Content-Type"].startswith("text/plain; version=0.0.4")


def test_another_address_is_refused_without_metrics(client):
    response = _get(client, "203.0.113.9")
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "forbidden"
    assert "LCM_METRICS_ALLOWED_NETWORKS" in body["message"]
    assert b"# TYPE" not in response.content
    assert "WWW-Authenticate" not in response  # no token configured: none to ask for


def test_an_allowed_network_reads_metrics(client, settings):
    settings.LCM_METRICS_ALLOWED_NETWORKS = "10.0.0.0/8, 2001:db8::/32"
    assert _get(client, "10.1.2.3").status_code == 200
    assert _get(client, "2001:db8::7").status_code == 200
    assert _get(client, "127.0.0.1").status_code == 403  # loopback is no longer listed
    assert _get(client, "11.0.0.1").status_code == 403


def test_the_bearer_token_reads_metrics_from_anywhere(client, settings):
    settings.LCM_METRICS_TOKEN = "scrape-secret-1"
    ok = _get(client, "203.0.113.9", HTTP_AUTHORIZATION="Bearer scrape-secret-1")
    assert ok.status_code == 200
    wrong = _get(client, "203.0.113.9", HTTP_AUTHORIZATION="Bearer scrape-secret-2")
    assert wrong.status_code == 403
    assert wrong["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert (
        _get(client, "203.0.113.9", HTTP_AUTHORIZATION="Token scrape-secret-1").status_code == 403
    )
    assert _get(client, "203.0.113.9").status_code == 403


def test_an_empty_allowlist_and_no_token_refuses_everyone(client, settings):
    settings.LCM_METRICS_ALLOWED_NETWORKS = ""
    assert _get(client, "127.0.0.1").status_code == 403


def test_a_malformed_network_stops_start_up_naming_the_variable(settings):
    settings.LCM_METRICS_ALLOWED_NETWORKS = "10.0.0.0/8,not-a-network"
    with pytest.raises(
        ImproperlyConfigured,
        match="LCM_METRICS_ALLOWED_NETWORKS='10.0.0.0/8,not-a-network' is invalid",
    ):
        validate_metrics_guard()
