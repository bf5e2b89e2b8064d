"""API tokens: only a SHA-256 digest of each key is stored, with a short prefix to tell
tokens apart in lists. A copy of the database therefore authenticates nobody: the digest
is not a key, and a key cannot be recovered from it (keys are 256 random bits, so a
plain digest is as strong as a slow password hash, and much faster to check).

One live token per user and client name (a partial unique constraint: revoked tokens
stay as history). A token may expire (`expires_at`); `last_used_at` is refreshed at most
once a minute per token."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(
        max_length=64, default="default", help_text="The client or device this token is for."
    )
    prefix = models.CharField(
        max_length=12, help_text="The key's first characters, to tell tokens apart."
    )
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the key, hex.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    legacy = models.BooleanField(
        default=False,
        help_text="Hashed from a token issued before hashing (a DRF token); works until rotated.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["user", "name"],
                condition=Q(revoked_at__isnull=True),
                name="tokens_one_live_token_per_user_and_name",
            ),
            models.CheckConstraint(condition=~Q(digest=""), name="tokens_digest_not_empty"),
        ]
        ordering = ["user_id", "name", "-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"
