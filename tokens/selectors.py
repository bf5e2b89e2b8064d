"""Reads of API tokens."""

from __future__ import annotations

from django.db.models import QuerySet

from tokens.models import ApiToken


def token_list(*, user=None, include_revoked: bool = False) -> QuerySet[ApiToken]:
    tokens = ApiToken.objects.select_related("user").order_by("user__username", "name", "-id")
    if user is not None:
        tokens = tokens.filter(user=user)
    if not include_revoked:
        tokens = tokens.filter(revoked_at__isnull=True)
    return tokens
