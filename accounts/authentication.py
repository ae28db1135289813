"""DRF authentication by named API token: ``Authorization: Token <token>`` (or ``Bearer``)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from .models import ApiToken, hash_token

KEYWORDS = (b"token", b"bearer")
LAST_USED_RESOLUTION = timedelta(minutes=1)  # write last_used_at at most once a minute


class ApiTokenAuthentication(BaseAuthentication):
    """Authenticates a request carrying one of the user's named tokens.

    A request without an ``Authorization`` header (or with another scheme) is left to
    the other authenticators; a malformed, unknown or revoked token fails the request
    (403 while SessionAuthentication comes first in the settings, as DRF takes the
    ``WWW-Authenticate`` challenge from the first authenticator; 401 otherwise).
    """

    keyword = "Token"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: give 'Token <token>'.")
        try:
            raw = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid token header: the token has invalid characters.") from exc
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_token(raw)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request) -> str:
        return self.keyword
