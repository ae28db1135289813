"""Named API tokens: several per user, each revocable on its own.

Only a SHA-256 digest of a token is stored. The token itself (``kvp_`` followed by
43 URL-safe characters, 256 bits of randomness) is shown once, when it is created;
a lost token is revoked and replaced, never recovered. A fast hash is enough here
because the secret is random and long, unlike a password.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

TOKEN_PREFIX = "kvp_"
TOKEN_SECRET_BYTES = 32
DISPLAY_PREFIX_LEN = len(TOKEN_PREFIX) + 6  # characters of the token kept to recognise it


def hash_token(raw: str) -> str:
    """Hex SHA-256 of a raw token, the only form kept in the database."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def generate_raw_token() -> str:
    """A fresh random token, e.g. ``kvp_3q2-…`` (47 characters)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_SECRET_BYTES)


class ApiToken(models.Model):
    """One named credential for scripts, sent as ``Authorization: Token <token>``."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'capacity notebook'.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=DISPLAY_PREFIX_LEN, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="accounts_apitoken_unique_name_per_user"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
