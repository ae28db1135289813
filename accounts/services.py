"""Writes for accounts: issue and revoke API tokens (keyword-only, atomic)."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from simulator.base.errors import FieldError

from .models import DISPLAY_PREFIX_LEN, ApiToken, generate_raw_token, hash_token

MAX_TOKENS_PER_USER = 50


@transaction.atomic
def api_token_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiToken, str]:
    """Create a named token for ``user``; returns the row and the raw token (shown once).

    Raises the one input error (:class:`~simulator.base.errors.FieldError`, at ``name``) when the name is blank, already used by this user, or the
    user already holds ``MAX_TOKENS_PER_USER`` tokens.
    """
    name = (name or "").strip()
    if not name:
        raise FieldError("Give the token a name.", field="name")
    if len(name) > 100:
        raise FieldError("At most 100 characters.", field="name")
    tokens = ApiToken.objects.select_for_update().filter(user=user)
    if tokens.filter(name=name).exists():
        raise FieldError(f"You already have a token named {name!r}.", field="name")
    if tokens.count() >= MAX_TOKENS_PER_USER:
        raise FieldError(f"At most {MAX_TOKENS_PER_USER} tokens per user; revoke one first.", field="name")
    raw = generate_raw_token()
    token = ApiToken.objects.create(user=user, name=name, key_hash=hash_token(raw), prefix=raw[:DISPLAY_PREFIX_LEN])
    return token, raw


def api_token_revoke(*, user: AbstractBaseUser, token_id: int) -> bool:
    """Delete one of ``user``'s tokens; False when it is not theirs or already gone."""
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    return deleted > 0


def api_token_list(*, user: AbstractBaseUser):
    """The user's tokens, newest first."""
    return ApiToken.objects.filter(user=user)
