"""DRF authentication with hashed API tokens: `Authorization: Token <key>` (as before)
or `Authorization: Bearer <key>`.

It subclasses DRF's `TokenAuthentication` and keeps its method names, so code written
against DRF's (`authenticate_credentials(key)` returning `(user, token)`) works unchanged."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication, get_authorization_header

from tokens.services import token_authenticate


class ApiTokenAuthentication(TokenAuthentication):
    keyword = "Token"
    keywords = (b"token", b"bearer")

    def authenticate(self, request):
        auth = get_authorization_header(request).split()
        if not auth or auth[0].lower() not in self.keywords:
            return None
        if len(auth) != 2:
            raise exceptions.AuthenticationFailed(
                "Invalid token header: expected 'Token <key>' with no spaces in the key."
            )
        try:
            key = auth[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed(
                "Invalid token header: the key holds invalid characters."
            ) from None
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key):
        token = token_authenticate(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token.")
        return token.user, token
