"""The redaction permit: the immutability triggers (security migration 0005) stand aside
for the current transaction only, the same way hard delete's permit lifts DELETE."""

from __future__ import annotations

from security.permits import transaction_permit


def redact_permit():
    """Allow UPDATEs of canonical rows inside the caller's transaction, and no longer."""
    return transaction_permit(setting="lcm.redact", table="security_redact_permit")
