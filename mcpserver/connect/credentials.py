"""Who the agent connects as: the user named by `--user` or owning `--token`, and for HTTP
the token it sends. With `--user` and no `--token`, the token already in the agent's
config is kept while it still authenticates as that user; otherwise a token named
`lcm_connect AGENT` is issued (rotated: an older one of that name is revoked)."""

from __future__ import annotations

import re

from django.contrib.auth import get_user_model

from tokens.services import token_authenticate, token_rotate

BEARER = re.compile(r"^Bearer\s+(\S+)$")


class CredentialsError(Exception):
    pass


def token_in(entry: dict | None) -> str | None:
    """The bearer token of an entry this command wrote (any header map in it)."""
    for key in ("headers", "http_headers"):
        headers = (entry or {}).get(key)
        if isinstance(headers, dict):
            match = BEARER.match(str(headers.get("Authorization", "")))
            if match:
                return match.group(1)
    return None


def user_named(name: str):
    user = get_user_model().objects.filter(username=name, is_active=True).first()
    if user is None:
        raise CredentialsError(f"no active user named {name!r}")
    return user


def owner_and_token(
    *, agent: str, username: str | None, token: str | None, existing: dict | None, http: bool
) -> tuple[str, str, bool]:
    """(username, token, issued). `token` given: its owner when it is one of this
    server's tokens. stdio needs no token (the process is started as the user)."""
    if token:
        found = token_authenticate(token)
        if found is not None:
            if username and found.user.get_username() != username:
                raise CredentialsError(f"--token belongs to another user than {username!r}")
            return found.user.get_username(), token, False
        if not http:
            raise CredentialsError("--token is not a live token of this server")
        return username or "", token, False  # a token of the remote server, unchecked
    if not username:
        raise CredentialsError("name the user: --user NAME (or --token KEY)")
    user = user_named(username)
    if not http:
        return username, "", False
    kept = token_in(existing)
    if kept:
        found = token_authenticate(kept)
        if found is not None and found.user_id == user.pk:
            return username, kept, False
    issued = token_rotate(user=user, name=f"lcm_connect {agent}")
    return username, issued.key, True
