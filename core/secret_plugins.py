"""detect-secrets plugins for the key shapes its own plugins miss.

Each is a `RegexBasedDetector`, so detect-secrets' own scanner can run them too. The
library's Stripe plugin knows only live keys of 24 characters, its OpenAI plugin only keys
that carry the `T3BlbkFJ` marker, and its GitHub plugin only the classic 36-character
tokens; agent sessions also carry test-mode Stripe keys, Anthropic and project-scoped
OpenAI keys, fine-grained GitHub tokens, bearer headers and tokens in URL queries.

The patterns here are written with a named group `secret` where the secret is only part of
the match (the scanner masks that group and keeps the rest, e.g. `Bearer `).
"""

from __future__ import annotations

import re

from detect_secrets.plugins import jwt
from detect_secrets.plugins.base import RegexBasedDetector


class AnthropicKeyDetector(RegexBasedDetector):
    """Anthropic API and admin keys (`sk-ant-api03-...`, `sk-ant-admin01-...`)."""

    secret_type = "Anthropic Key"
    denylist = (re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{8,}"),)


class OpenAIKeyDetector(RegexBasedDetector):
    """OpenAI keys: project, service-account and admin keys (`sk-proj-...`) and the legacy
    `sk-` + 48 (the scanner keeps those with a digit: `sk-some-long-kebab-name` is a name)."""

    secret_type = "OpenAI Key"
    denylist = (re.compile(r"\bsk-(?!ant-)[A-Za-z0-9_\-]{16,}"),)


class StripeKeyDetector(RegexBasedDetector):
    """Stripe secret and restricted keys, live and test mode, and webhook signing secrets
    (publishable `pk_` keys are public by design and left alone)."""

    secret_type = "Stripe Key"
    denylist = (
        re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"),
        re.compile(r"\bwhsec_[0-9A-Za-z]{24,}"),
    )


class GitHubTokenDetector(RegexBasedDetector):
    """GitHub tokens of any current length, and fine-grained personal access tokens."""

    secret_type = "GitHub Token"
    denylist = (
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}"),
        re.compile(r"\bgithub_pat_[A-Za-z0-9_]{30,}"),
    )


class JwtDetector(jwt.JwtTokenDetector):
    """detect-secrets' JWT shape with the signature included (its pattern ends lazily, so
    the signature would be left behind); its `is_formally_valid` still decides."""

    denylist = (re.compile(r"\beyJ[A-Za-z0-9\-_=]+\.[A-Za-z0-9\-_=]+\.[A-Za-z0-9\-_.+/=]*"),)


class GoogleApiKeyDetector(RegexBasedDetector):
    secret_type = "Google API Key"
    denylist = (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"),)


class HuggingFaceTokenDetector(RegexBasedDetector):
    secret_type = "Hugging Face Token"
    denylist = (re.compile(r"\bhf_[A-Za-z0-9]{34,}\b"),)


class AwsSecretKeyDetector(RegexBasedDetector):
    """An AWS secret access key assigned by name, quoted or not (detect-secrets' AWS plugin
    wants it quoted)."""

    secret_type = "AWS Secret Access Key"
    denylist = (
        re.compile(
            r"(?i)(?:aws_secret_access_key|aws_secret_key|secret_access_key)[\"']?\s*[:=]\s*"
            r"[\"']?(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
    )


class BearerTokenDetector(RegexBasedDetector):
    """The credential of an `Authorization: Bearer ...` header (the word stays)."""

    secret_type = "Bearer Token"
    denylist = (re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)"),)


class UrlPasswordDetector(RegexBasedDetector):
    """A password in a URL (`scheme://user:PASSWORD@host`). RFC 3986 lets the user
    information hold the sub-delimiters `! $ & ' ( ) * + , ; =`, percent-escapes and `:`,
    which detect-secrets' BasicAuthDetector leaves out (`postgres://app:pa$$w0rd!@db`).
    The user name may be empty (`redis://:PASSWORD@host`); the password runs to the last
    `@` before the host, so one holding an `@` of its own is masked whole."""

    secret_type = "URL Password"
    denylist = (
        re.compile(
            r"://[^\s:/?#\[\]@\"'<>`]*:"
            r"(?P<secret>[^\s/?#\[\]\"<>`]+)@(?=[A-Za-z0-9\[])"
        ),
    )


class UrlTokenDetector(RegexBasedDetector):
    """A credential in a URL's query (`?access_token=...`, `&api_key=...`)."""

    secret_type = "URL Token"
    denylist = (
        re.compile(
            r"(?i)[?&](?:access_token|auth_token|api_key|apikey|token|secret|client_secret"
            r"|password|sig|signature)=(?P<secret>[A-Za-z0-9\-._~%+/]{12,})"
        ),
    )


class AssignedSecretDetector(RegexBasedDetector):
    """A value assigned to a name that says it is secret (`DB_PASSWORD=...`,
    `"api_key": "..."`, `client_secret: ...`). The scanner keeps only values that look
    random (see `core.secret_scan`): names alone say nothing of `password: str`."""

    secret_type = "Secret Keyword"
    denylist = (
        re.compile(
            r"(?i)(?:password|passwd|secret|api[_\-]?key|apikey|access[_\-]?key|auth[_\-]?token"
            r"|access[_\-]?token|private[_\-]?key|client[_\-]?secret)(?:[_\-]?key)?"
            r"[\"']?\s*(?:=|:|:=|=>)\s*[\"']?(?P<secret>[A-Za-z0-9_\-+/.~!@#$%^*]{12,}=*)"
        ),
    )
