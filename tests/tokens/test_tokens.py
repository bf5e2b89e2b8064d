"""Hashed API tokens: only a digest is stored, so a copy of the database authenticates
nobody; tokens expire, are revoked and rotated (audited), one live token per client name,
and tokens issued before hashing keep working until rotated."""

from __future__ import annotations

import importlib
from datetime import timedelta
from io import StringIO

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from security.models import AuditEvent
from tests.factories import UserFactory
from tests.support.concurrent import run_together
from tests.support.tokens import issue_token
from tokens.authentication import ApiTokenAuthentication
from tokens.models import ApiToken
from tokens.services import (
    TokenError,
    key_digest,
    token_authenticate,
    token_issue,
    token_revoke,
    token_rotate,
)

pytestmark = pytest.mark.django_db

URL = "/api/v1/conversations/"


def _status(key: str, keyword: str = "Token") -> int:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {key}")
    return client.get(URL).status_code


def _every_stored_value() -> list[str]:
    """Every value of every row of every table, as text: what a stolen copy holds."""
    values = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            values += [str(value) for row in cursor.fetchall() for value in row]
    return values


def test_an_issued_key_authenticates_and_only_its_digest_is_stored(user):
    issued = token_issue(user=user, name="laptop")
    assert _status(issued.key) == 200
    assert _status(issued.key, keyword="Bearer") == 200
    row = ApiToken.objects.get()
    assert row.digest == key_digest(issued.key) != issued.key
    assert row.prefix == issued.key[:12]
    assert len(issued.key) == 44 and issued.key.startswith("lcm_")
    assert row.expires_at is not None
    assert timedelta(days=364) < row.expires_at - timezone.now() <= timedelta(days=365)


def test_a_stolen_database_copy_authenticates_nobody(user):
    key = issue_token(user)
    stored = _every_stored_value()
    assert not any(key in value for value in stored)
    assert not any(key[12:] in value for value in stored)  # no secret part, anywhere
    row = ApiToken.objects.get()
    for value in (row.digest, row.prefix, str(row.pk), row.name):
        assert _status(value) == 401
        assert token_authenticate(value) is None
    assert _status(key) == 200  # the key itself still works


def test_a_revoked_token_is_refused_and_the_revocation_audited(user):
    issued = token_issue(user=user, name="ci")
    assert token_revoke(token=issued.token, via="command") is True
    assert token_revoke(token=issued.token, via="command") is False
    assert _status(issued.key) == 401
    assert list(
        AuditEvent.objects.order_by("id").values_list("action", "target_id", "details")
    ) == [
        (
            "token_issue",
            str(issued.token.pk),
            {"user_id": user.pk, "prefix": issued.key[:12], "name": "ci"},
        ),
        (
            "token_revoke",
            str(issued.token.pk),
            {"user_id": user.pk, "prefix": issued.key[:12], "name": "ci"},
        ),
    ]


def test_an_expired_token_is_refused(user):
    issued = token_issue(user=user, name="ci", days=1)
    assert _status(issued.key) == 200
    ApiToken.objects.filter(pk=issued.token.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert _status(issued.key) == 401


def test_zero_days_never_expires_and_the_default_follows_the_setting(user, settings):
    assert token_issue(user=user, name="a", days=0).token.expires_at is None
    settings.LCM_TOKEN_DEFAULT_DAYS = 7
    expires = token_issue(user=user, name="b").token.expires_at
    assert timedelta(days=6) < expires - timezone.now() <= timedelta(days=7)


def test_one_live_token_per_user_and_client_name(user, other_user):
    token_issue(user=user, name="phone")
    with pytest.raises(TokenError, match="already has a live token named 'phone'"):
        token_issue(user=user, name="phone")
    assert ApiToken.objects.filter(user=user).count() == 1
    token_issue(user=user, name="laptop")  # another client of the same user
    token_issue(user=other_user, name="phone")  # the same name for another user
    assert ApiToken.objects.count() == 3


def test_rotation_replaces_the_key_and_keeps_the_old_row_as_history(user):
    first = token_issue(user=user, name="ci")
    second = token_rotate(user=user, name="ci")
    assert _status(first.key) == 401
    assert _status(second.key) == 200
    assert ApiToken.objects.filter(user=user, revoked_at__isnull=True).get().pk == second.token.pk
    assert ApiToken.objects.filter(user=user).count() == 2
    assert list(AuditEvent.objects.order_by("id").values_list("action", flat=True)) == [
        "token_issue",
        "token_revoke",
        "token_rotate",
    ]


def test_an_inactive_users_token_is_refused(user):
    key = issue_token(user)
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert _status(key) == 401


def test_last_use_is_recorded_at_most_once_a_minute(user):
    issued = token_issue(user=user, name="ci")
    assert issued.token.last_used_at is None
    assert _status(issued.key) == 200
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    assert _status(issued.key) == 200
    assert ApiToken.objects.get().last_used_at == first  # within the minute: no write
    ApiToken.objects.update(last_used_at=first - timedelta(minutes=2))
    assert _status(issued.key) == 200
    assert ApiToken.objects.get().last_used_at > first


def test_the_auth_class_keeps_drfs_authenticate_credentials(user):
    key = issue_token(user)
    authenticated_user, token = ApiTokenAuthentication().authenticate_credentials(key)
    assert (authenticated_user.pk, token.digest) == (user.pk, key_digest(key))
    from rest_framework.exceptions import AuthenticationFailed

    with pytest.raises(AuthenticationFailed):
        ApiTokenAuthentication().authenticate_credentials("lcm_not-a-key")


def test_a_token_issued_before_hashing_keeps_working_until_rotated(user, other_user):
    # A plain-text DRF token as the previous release stored it (the one place a test
    # writes DRF's model: it is what the migration converts).
    old = Token.objects.create(user=user)
    older = Token.objects.create(user=other_user)
    migration = importlib.import_module("tokens.migrations.0002_hash_legacy_tokens")
    migration.hash_legacy_tokens(django_apps, None)
    assert Token.objects.count() == 0  # the plain text is gone
    assert not any(old.key in value for value in _every_stored_value())
    assert _status(old.key) == 200 and _status(older.key) == 200
    legacy = ApiToken.objects.get(user=user)
    assert (legacy.legacy, legacy.name, legacy.expires_at) == (True, "default", None)
    rotated = token_rotate(user=user, name="default")
    assert _status(old.key) == 401
    assert _status(rotated.key) == 200
    assert _status(older.key) == 200


def test_the_lcm_token_command_issues_lists_and_revokes(user):
    out = StringIO()
    call_command("lcm_token", "issue", "owner", "--name", "cli", "--days", "30", stdout=out)
    key = out.getvalue().split("token: ", 1)[1].strip()
    assert _status(key) == 200
    out = StringIO()
    call_command("lcm_token", "list", stdout=out)
    line = out.getvalue().strip()
    assert line.startswith(f"owner\t{key[:12]}…\tcli\tlive\texpires ")
    call_command("lcm_token", "revoke", "owner", "--prefix", key[:12], stdout=StringIO())
    assert _status(key) == 401
    assert list(AuditEvent.objects.values_list("via", flat=True)) == ["command", "command"]


def test_lcm_create_user_prints_a_working_key_and_revokes_the_previous_one(db):
    out = StringIO()
    call_command("lcm_create_user", "newbie", stdout=out)
    first = out.getvalue().split("token: ", 1)[1].strip()
    out = StringIO()
    call_command("lcm_create_user", "newbie", stdout=out)
    second = out.getvalue().split("token: ", 1)[1].strip()
    assert _status(first) == 401
    assert _status(second) == 200


def test_each_test_key_is_a_separate_token(user):
    a, b = issue_token(user), issue_token(UserFactory(username="third"))
    c = issue_token(user)
    assert len({a, b, c}) == 3
    assert [_status(k) for k in (a, b, c)] == [200, 200, 200]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_rotations_leave_exactly_one_live_token():

    user = UserFactory(username="racer")
    token_issue(user=user, name="ci")
    keys = run_together(lambda: token_rotate(user=user, name="ci").key, times=4, timeout=30)
    live = ApiToken.objects.filter(user=user, name="ci", revoked_at__isnull=True)
    assert live.count() == 1
    assert ApiToken.objects.filter(user=user, name="ci").count() == 5
    assert [_status(key) for key in keys].count(200) == 1
    assert (
        list(AuditEvent.objects.filter(action="token_rotate").values_list("action", flat=True))
        == ["token_rotate"] * 4
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_first_rotations_leave_exactly_one_live_token():
    """No live token to lock: the racers meet at the partial unique constraint."""

    user = UserFactory(username="racer2")
    keys = run_together(lambda: token_rotate(user=user, name="new").key, times=3, timeout=30)
    assert ApiToken.objects.filter(user=user, name="new", revoked_at__isnull=True).count() == 1
    assert [_status(key) for key in keys].count(200) == 1
