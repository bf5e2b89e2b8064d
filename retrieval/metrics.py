"""Retrieval figures read from the database at scrape time."""

from __future__ import annotations

from django.utils import timezone

from lcmsite.metrics import Sample
from retrieval.models import DelegationGrant


def collect():
    live = DelegationGrant.objects.filter(revoked_at__isnull=True, expires_at__gt=timezone.now())
    yield Sample(
        "lcm_delegation_grants_active",
        "gauge",
        "Delegation grants neither revoked nor expired (running sub-agent expansions).",
        (({}, float(live.count())),),
    )
