"""What a redaction removes, as one matcher, and how it is kept while the job runs.

A literal or a regex is compiled as given; a redaction by message or span becomes the
literal strings it removed from the canonical rows (its "needles"), so every derived
place is scrubbed of exactly those strings. Matches are replaced by the marker
`[redacted: <reason> <id>]`.

The needles are kept only encrypted (`seal` / `unseal`: Fernet under a key derived from
SECRET_KEY), in the job row, for resume and verify; the job clears them when done.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass

import regex as regex_engine  # `regex` names a parameter below
from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

# A user's pattern runs over all of their data: each match call gives up after this long
# (the `regex` package's timeout; `re` has none), so a catastrophic pattern fails the
# request with a 400 (the plan runs first) instead of holding a worker.
MATCH_TIMEOUT = 1.0

# Needles shorter than this are not scrubbed from derived places (a whole message "ok"
# would otherwise take every "ok" with it); the canonical row is still redacted.
MIN_NEEDLE = 6


def marker(reason: str, redaction_id: str) -> str:
    return f"[redacted: {reason} {redaction_id}]"


@dataclass
class Matcher:
    pattern: regex_engine.Pattern
    replacement: str

    @classmethod
    def of(cls, *, literal: str | None, regex: str | None, needles: list[str], mark: str):
        if literal is not None:
            source = regex_engine.escape(literal)
        elif regex is not None:
            source = regex
        else:
            kept = sorted({n for n in needles if len(n) >= MIN_NEEDLE}, key=len, reverse=True)
            source = "|".join(regex_engine.escape(n) for n in kept) or r"(?!x)x"
        return cls(regex_engine.compile(source), mark)

    def sub(self, text: str) -> tuple[str, int]:
        if not text:
            return text, 0
        return self.pattern.subn(lambda _: self.replacement, text, timeout=MATCH_TIMEOUT)

    def sub_value(self, value):
        """Every string inside a JSON value (keys too), and how many matches."""
        if isinstance(value, str):
            return self.sub(value)
        if isinstance(value, list):
            out, total = [], 0
            for item in value:
                new, n = self.sub_value(item)
                out.append(new)
                total += n
            return out, total
        if isinstance(value, dict):
            out, total = {}, 0
            for key, item in value.items():
                new_key, n1 = self.sub(key) if isinstance(key, str) else (key, 0)
                new, n2 = self.sub_value(item)
                out[new_key] = new
                total += n1 + n2
            return out, total
        return value, 0

    def sub_bytes(self, data: bytes) -> tuple[bytes, int]:
        """Bytes of a file: as UTF-8 text when they are, else matched byte-wise."""
        try:
            text = data.decode()
        except UnicodeDecodeError:
            pattern = regex_engine.compile(self.pattern.pattern.encode())
            return pattern.subn(lambda _: self.replacement.encode(), data, timeout=MATCH_TIMEOUT)
        new, count = self.sub(text)
        return (new.encode(), count) if count else (data, 0)

    def found(self, text: str) -> list[str]:
        found = self.pattern.finditer(text or "", timeout=MATCH_TIMEOUT)
        return [m.group(0) for m in found if m.group(0)]

    def search(self, text: str) -> bool:
        return bool(text) and self.pattern.search(text, timeout=MATCH_TIMEOUT) is not None


def _fernet() -> Fernet:
    digest = hashlib.sha256(b"lcm-redaction-seal:" + settings.SECRET_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def seal(payload: dict) -> str:
    return _fernet().encrypt(json.dumps(payload).encode()).decode()


def unseal(token: str) -> dict:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken:
        raise RuntimeError("the redaction's sealed needles do not open under SECRET_KEY") from None
