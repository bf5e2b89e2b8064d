"""Rate limits: per token and per IP on the API, failed sign-ins on the login page."""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from security.models import AuditEvent
from security.throttling import validate_rates
from tests.conftest import token_client


@pytest.fixture(autouse=True)
def _fresh_counters():
    cache.clear()
    _not_at_a_window_edge()
    yield
    cache.clear()


def _not_at_a_window_edge(margin: float = 5.0) -> None:
    """Start a test at least `margin` seconds before the minute's fixed window ends: a test's
    requests must fall in one window (one that crossed the edge was counted twice from zero,
    and failed on a loaded machine)."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.05)


@pytest.mark.django_db
def test_a_token_over_its_rate_gets_429_in_the_error_shape(settings, user, other_user):
    settings.LCM_THROTTLE_USER_RATE = "3/min"
    api = token_client(user)
    statuses = [api.get("/api/v1/conversations/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    response = api.get("/api/v1/conversations/")
    assert response.status_code == 429
    assert set(response.json()) == {"code", "message", "extra"}
    assert response.json()["code"] == "throttled"
    assert 1 <= int(response["Retry-After"]) <= 60
    # Another token is counted on its own.
    assert token_client(other_user).get("/api/v1/conversations/").status_code == 200


@pytest.mark.django_db
def test_requests_are_limited_per_ip_across_tokens(settings, user, other_user):
    settings.LCM_THROTTLE_IP_RATE = "3/min"
    first, second = token_client(user), token_client(other_user)
    statuses = [
        client.get("/api/v1/conversations/", REMOTE_ADDR="10.0.0.1").status_code
        for client in (first, second, first, second)
    ]
    assert statuses == [200, 200, 200, 429]
    assert first.get("/api/v1/conversations/", REMOTE_ADDR="10.0.0.2").status_code == 200


@pytest.mark.django_db
def test_bad_credentials_are_limited_per_ip(settings, anon_api, api):
    settings.LCM_AUTH_FAILURE_RATE = "2/min"
    anon_api.credentials(HTTP_AUTHORIZATION="Token guessed0000000000000000000000000000")
    statuses = [
        anon_api.get("/api/v1/conversations/", REMOTE_ADDR="10.0.0.1").status_code for _ in range(3)
    ]
    assert statuses == [401, 401, 429]
    response = api.get("/api/v1/conversations/", REMOTE_ADDR="10.0.0.1")
    assert response.status_code == 429  # the address is locked, whatever it sends now
    assert response.json()["code"] == "throttled"
    assert 1 <= int(response["Retry-After"]) <= 60
    assert api.get("/api/v1/conversations/", REMOTE_ADDR="10.0.0.2").status_code == 200


@pytest.mark.django_db
def test_an_empty_rate_means_no_limit(settings, api):
    settings.LCM_THROTTLE_USER_RATE = ""
    assert {api.get("/api/v1/conversations/").status_code for _ in range(30)} == {200}


def test_a_malformed_rate_stops_start_up_naming_the_variable(settings):
    settings.LCM_THROTTLE_USER_RATE = "lots"
    with pytest.raises(ImproperlyConfigured, match="LCM_THROTTLE_USER_RATE"):
        validate_rates()


def _login(client, username, password, ip="10.1.1.1"):
    return client.post(
        "/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip
    )


@pytest.mark.django_db
def test_failed_sign_ins_are_throttled_per_ip_with_retry_after(settings, client, user):
    settings.LCM_LOGIN_FAILURE_RATE = "3/min"
    user.set_password("right")
    user.save()
    assert [_login(client, f"nobody{i}", "wrong").status_code for i in range(3)] == [200] * 3
    response = _login(client, "owner", "right")  # even the right password: the IP is locked
    assert response.status_code == 429
    assert response.json()["code"] == "throttled"
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "_auth_user_id" not in client.session
    assert AuditEvent.objects.filter(action="login_throttled").count() == 1
    # Another address signs in normally.
    assert _login(client, "owner", "right", ip="10.9.9.9").status_code == 302


@pytest.mark.django_db
def test_failed_sign_ins_are_throttled_per_user_name_across_ips(settings, client, user):
    settings.LCM_LOGIN_FAILURE_RATE = "2/min"
    assert _login(client, "owner", "x", ip="10.0.0.1").status_code == 200
    assert _login(client, "OWNER", "x", ip="10.0.0.2").status_code == 200
    assert _login(client, "owner", "x", ip="10.0.0.3").status_code == 429


@pytest.mark.django_db
def test_successful_sign_ins_never_count(settings, client, user):
    settings.LCM_LOGIN_FAILURE_RATE = "2/min"
    user.set_password("right")
    user.save()
    for _ in range(5):
        assert _login(client, "owner", "right").status_code == 302
        client.logout()


@pytest.mark.django_db
def test_the_admin_sign_in_is_throttled_too(settings, client, staff_user):
    settings.LCM_LOGIN_FAILURE_RATE = "1/min"
    data = {"username": "staff", "password": "wrong", "next": "/admin/"}
    assert client.post("/admin/login/", data, REMOTE_ADDR="10.2.2.2").status_code == 200
    assert client.post("/admin/login/", data, REMOTE_ADDR="10.2.2.2").status_code == 429
