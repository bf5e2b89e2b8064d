"""Encryption at rest for files the server writes outside the database (SRD 14.3).

One key (`LCM_ENCRYPTION_KEY`, a Fernet key) encrypts; it and the retired keys in
`LCM_ENCRYPTION_OLD_KEYS` decrypt, so a key can be rotated without downtime and the old
files re-encrypted later (`manage.py lcm_rotate_key`). With no key set nothing is
encrypted, and every reader still accepts clear data, so turning encryption on needs no
migration of existing files.

Two shapes:
- JSON-lines files (stream journals, turn event logs): each line is encrypted on its own
  (`encrypt_line`), so appends stay appends and a torn last line stays one lost line.
  A Fernet token is URL-safe base64 and never contains a newline; a clear line starts
  with `{`, so a reader tells the two apart.
- Whole objects (large files): `encrypt_bytes` adds a magic prefix to the token.
"""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

MAGIC = b"LCMENC1\n"  # marks an encrypted whole object


class DecryptionError(ValueError):
    """Data that looks encrypted but no configured key opens (or it was tampered with).

    A `ValueError`, so JSON-lines readers that skip a torn line skip it the same way."""


def _fernet(value: str, variable: str) -> Fernet:
    try:
        return Fernet(value.strip().encode())
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            f"{variable} is invalid: expected a Fernet key (32 url-safe base64 bytes; "
            "make one with `manage.py lcm_rotate_key --generate`)"
        ) from None


@cache
def _keys(current: str, old: str) -> MultiFernet | None:
    fernets = [_fernet(current, "LCM_ENCRYPTION_KEY")] if current.strip() else []
    fernets += [_fernet(item, "LCM_ENCRYPTION_OLD_KEYS") for item in old.split(",") if item.strip()]
    return MultiFernet(fernets) if fernets else None


def _configured() -> tuple[str, str]:
    return (
        getattr(settings, "LCM_ENCRYPTION_KEY", "") or "",
        getattr(settings, "LCM_ENCRYPTION_OLD_KEYS", "") or "",
    )


def validate_configuration() -> None:
    """Raise `ImproperlyConfigured` for a malformed key (called at start-up)."""
    current, old = _configured()
    if old.strip() and not current.strip():
        raise ImproperlyConfigured("LCM_ENCRYPTION_OLD_KEYS is set but LCM_ENCRYPTION_KEY is not")
    _keys(current, old)


def encryption_enabled() -> bool:
    return bool(_configured()[0].strip())


def _encrypter() -> MultiFernet | None:
    current, old = _configured()
    return _keys(current, old) if current.strip() else None


def _decrypter() -> MultiFernet | None:
    return _keys(*_configured())


def generate_key() -> str:
    return Fernet.generate_key().decode()


# JSON lines -------------------------------------------------------------------------------


def encrypt_line(line: bytes) -> bytes:
    """One line (without its newline) as it goes to disk: clear when no key is set."""
    fernet = _encrypter()
    return line if fernet is None else fernet.encrypt(line)


def decrypt_line(raw: bytes) -> bytes:
    """The clear bytes of one stored line (clear lines pass through)."""
    raw = raw.strip()
    if not raw or raw.startswith(b"{"):
        return raw
    fernet = _decrypter()
    if fernet is None:
        raise DecryptionError("encrypted line but LCM_ENCRYPTION_KEY is not set")
    try:
        return fernet.decrypt(raw)
    except InvalidToken:
        raise DecryptionError("no configured key decrypts this line") from None


# Whole objects ----------------------------------------------------------------------------


def encrypt_bytes(data: bytes) -> bytes:
    fernet = _encrypter()
    return data if fernet is None else MAGIC + fernet.encrypt(data)


def is_encrypted_bytes(data: bytes) -> bool:
    return data.startswith(MAGIC)


def decrypt_bytes(data: bytes) -> bytes:
    if not is_encrypted_bytes(data):
        return data
    fernet = _decrypter()
    if fernet is None:
        raise DecryptionError("encrypted object but LCM_ENCRYPTION_KEY is not set")
    try:
        return fernet.decrypt(data[len(MAGIC) :])
    except InvalidToken:
        raise DecryptionError("no configured key decrypts this object") from None


def rotate_line(raw: bytes) -> bytes:
    """A stored line re-encrypted under the current key (clear lines get encrypted)."""
    return encrypt_line(decrypt_line(raw))


def rotate_bytes(data: bytes) -> bytes:
    return encrypt_bytes(decrypt_bytes(data))


def needs_rotation(data: bytes) -> bool:
    """Whether an object is not yet encrypted under the current key: stored in clear while a
    key is set, or encrypted under one of LCM_ENCRYPTION_OLD_KEYS."""
    current = _configured()[0]
    if not current.strip():
        return False
    if not is_encrypted_bytes(data):
        return True
    try:
        _fernet(current, "LCM_ENCRYPTION_KEY").decrypt(data[len(MAGIC) :])
    except InvalidToken:
        return True
    return False
