"""Known secret shapes for the ingest and redaction tests, built from short fragments so
that this repository holds no scannable real-looking secret (none of these is a real key).

`SHAPES`: kind -> (text around the secret, the secret), one per kind, which every ingest
path's tests send. `CORPUS`: every shape the detector must mask, as (kind, text around it,
the secret): SHAPES and more forms of each kind; it grows with every shape a user or a
check finds unmasked. `ORDINARY`: text that must pass unchanged (code, hashes, uuids,
base64 of ordinary content, placeholders); tests/conversations/ordinary_messages.py holds
the longer corpus of ordinary technical messages.
"""

from __future__ import annotations

import base64

# 48 characters of letters and digits, in pieces of six.
_R = "".join(["Zq8Xw2", "Vb6Nm4", "Lk0Jh9", "Gf7Ds5", "Aa3Qp1", "Wo9Ei7", "Ru5Ty3", "Hc2Pm8"])
_HEX = "".join(["3f7a9c", "11d2e4", "b5a6c8", "d0e1f2", "a3b4c5", "d6e7f8"])


def _join(*pieces: str) -> str:
    return "".join(pieces)


def _pem(kind: str) -> str:
    body = "\n".join([_R, _R[::-1], _R[5:] + "=="])
    return _join("-----BEGIN ", kind, " PRIVATE KEY-----\n", body, "\n-----END ", kind,
                 " PRIVATE KEY-----")  # fmt: skip


def _jwt() -> str:
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').decode().rstrip("=")
    claims = base64.urlsafe_b64encode(b'{"sub":"1234","name":"x"}').decode().rstrip("=")
    return _join(head, ".", claims, ".", _R[:43])


SHAPES: dict[str, tuple[str, str]] = {
    "anthropic_key": ("export ANTHROPIC_API_KEY={}", _join("sk-", "ant-", "api03-", _R)),
    "openai_key": ("OPENAI_API_KEY={} # project key", _join("sk-", "proj-", _R)),
    "stripe_key": ("stripe.api_key = '{}'", _join("sk", "_test_", _R[:32])),
    "github_token": ("GITHUB_TOKEN={} gh pr list", _join("gh", "p_", _R[:36])),
    "aws_access_key_id": ("aws_access_key_id = {}", _join("AK", "IA", "Q7ZXW2VB6NM4LK0J")),
    "aws_secret_access_key": ("aws_secret_access_key={}", (_R + _R)[:40]),
    "private_key": ("the key:\n{}\nend", _pem("RSA")),
    # RFC 3986 lets a password hold `! $ & ' ( ) * + , ; =` (issue 43, item 2).
    "url_password": ("DATABASE_URL=postgres://app:{}@db.internal:5432/app", _join("pa$$", "w0rd!")),
    "url_token": ("GET https://api.example.org/v1/items?access_token={}&page=2", _R[:32]),
    "bearer_token": ("curl -H 'Authorization: Bearer {}' https://api", _R[:40]),
    "jwt": ("session cookie {} expired", _jwt()),
    "slack_token": ("SLACK={}", _join("xo", "xb-", "123456789012-", "1234567890123-", _R[:24])),
    "google_api_key": ("maps?key={}", _join("AI", "za", "Sy", _R[:33])),
    "secret_assignment": ('{{"client_secret": "{}"}}', _join("a1B2", "c3D4", "e5F6", "g7H8")),
    "high_entropy_string": ('const signing = "{}";', _R[:40]),
}  # fmt: skip


def shape_text(kind: str) -> str:
    around, secret = SHAPES[kind]
    return around.format(secret)


ORDINARY = [
    "def total(items):\n    return sum(i.price * i.count for i in items)  # O(n)\n",
    _join("commit ", _HEX[:40], " (sha1); sha256 ", _HEX * 2, "\n"),
    "request id 123e4567-e89b-12d3-a456-426614174000 finished in 12 ms",
    'payload = "' + base64.b64encode(b"an ordinary sentence, base64 encoded").decode() + '"',
    "def login(password: str, token_count: int) -> bool: return check(self.api_key)",
    'password = os.environ["DB_PASSWORD"]; api_key = settings.STRIPE_SECRET_KEY',
    "curl -H 'Authorization: Bearer YOUR_API_KEY' https://api.example.org",
    'import { useState } from "react"; const cls = "getElementsByClassName";',
    'path = "/var/folders/4n/2f7pppjd2_n0fftzg8vrlg040000gn/T/tmpzpz61wxy"',
    '<link integrity="sha384-' + _R[:40] + '" rel="stylesheet">',
    "the test-key shape sk-some-kebab-name is a name, not a key",
    "| API Keys | `api_key: sk" + "_test_abc123...` |",  # an elided example
]


# Passwords in URLs, with each of RFC 3986's sub-delimiters, percent-escapes, a colon or an
# `@` of their own, and an empty user name (Redis).
_URL_PASSWORDS = [
    ("postgres://app:{}@db/app?sslmode=require", _join("pa$$", "w0rd!")),
    ("curl https://u:{}@host/api/v1", _join("p(a)ss", ";word")),
    ("mysql://root:{}@127.0.0.1:3306/shop", _join("Tr0ub4", "dor&3")),
    ("amqp://worker:{}@rabbit:5672/%2f", _join("k'9", "Qz*x")),
    ("mongodb+srv://svc:{}@cluster0.mongodb.net/prod", _join("Zx+9", "v,w2")),
    ("REDIS_URL=redis://:{}@cache.internal:6379/0", _join("r3d1", "s=Kq7")),
    ("git clone https://deploy:{}@git.example.org/team/app.git", _join("gh0st", "%40pass%21")),
    ("postgresql://etl:{}@warehouse:5432/dw", _join("a:b", "!c9$d")),
    ("ftp://backup:{}@files.example.net/nightly/", _join("S3cr", "@t!x")),
    ("sftp://ops:{}@bastion", _join("(x)", "y=z7")),
]
CORPUS: list[tuple[str, str, str]] = [
    *((kind, around, secret) for kind, (around, secret) in SHAPES.items()),
    *(("url_password", around, secret) for around, secret in _URL_PASSWORDS),
]
