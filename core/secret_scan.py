"""The secret detector: where the secrets are in a text, and the text with them masked.

Built on detect-secrets' plugins (provider and cloud keys, tokens, JWTs, URLs with
credentials, private keys, high-entropy strings) and its heuristic filters, plus the plugins
of `core.secret_plugins` for the shapes it misses. Ingest (`conversations.secret_guard`)
masks or flags what it finds before anything is stored; the outbound redaction hook
(`providers.redaction`) masks the same findings in what a provider is sent.

Two families, in this order: specific shapes (a key whose form names its provider), then
generic ones (a value assigned to a secret-sounding name, a quoted high-entropy string),
kept only where they look random and overlap no specific finding. The generic family is
tuned on real agent sessions so that code, hashes, uuids and base64 of ordinary content
are left alone (docs/security.md, "Secrets at ingest"; the measure in docs/benchmarks.md).

Masking is deterministic: the same text always gives the same result, and only the spans
found change (each becomes `[secret:<kind>]`, or the marker the caller names).
"""

from __future__ import annotations

import base64
import binascii
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from detect_secrets.filters import heuristic
from detect_secrets.plugins import (
    artifactory,
    aws,
    azure_storage_key,
    discord,
    gitlab_token,
    jwt,
    mailchimp,
    npm,
    openai,
    pypi_token,
    sendgrid,
    slack,
    square_oauth,
    stripe,
    telegram_token,
    twilio,
)
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

from core import secret_plugins as own

MARKER = "[secret:{kind}]"


@dataclass(frozen=True)
class Finding:
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class _Rule:
    """One pattern of a plugin: its kind, the substrings without which it cannot match (a
    cheap test before the regex; lower-case needles are looked for in the lowered text),
    the group holding the secret (0: the whole match) and an optional check of the value."""

    kind: str
    pattern: re.Pattern
    needles: tuple[str, ...]
    group: int | str = 0
    check: Callable[[str, str, int], bool] | None = None
    lowered: re.Pattern | None = None  # the same pattern for lowered text, when case-blind


def _rules(kind, plugin, needles, group=0, check=None, only=None) -> list[_Rule]:
    patterns = list(plugin.denylist)
    if only is not None:
        patterns = [patterns[i] for i in only]
    rules = []
    for pattern in patterns:
        chosen = "secret" if "secret" in pattern.groupindex else group
        blind = None
        if pattern.flags & re.IGNORECASE:  # Python's re is slow at case-blind alternations
            blind = re.compile(pattern.pattern.replace("(?i)", ""), pattern.flags & ~re.I)
        rules.append(_Rule(kind, pattern, tuple(needles), chosen, check, blind))
    return rules


def _has_digit(value: str, text: str, start: int) -> bool:
    return any(c.isdigit() for c in value)


def _jwt_valid(value: str, text: str, start: int) -> bool:
    return jwt.JwtTokenDetector.is_formally_valid(value)


# --- the generic family's tests of "looks random" ------------------------------------------

_ENTROPY = Base64HighEntropyString(limit=4.5)
_HEX = frozenset(string.hexdigits)
_PRINTABLE = frozenset(string.printable.encode())
# A dotted name (`settings.SECRET_KEY`, `argon2.hash_password`) or a subresource-integrity
# digest (`sha384-...`, public by design).
_REFERENCE = re.compile(r"^(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|sha(?:256|384|512)-.*)$")
_TEMPLATED = re.compile(r"\$\{|\{\{|<[A-Za-z_]|%\(|^\$|^%|^\*+$|x{6,}|X{6,}|\.{3}")


def _entropy(value: str) -> float:
    return _ENTROPY.calculate_shannon_entropy(value)


def _decodes_to_text(value: str) -> bool:
    """Base64 of ordinary content (text, JSON) is content, not a key."""
    if len(value) < 16:
        return False
    padded = value + "=" * (-len(value) % 4)
    try:
        raw = base64.b64decode(padded, altchars=b"-_" if "-" in value or "_" in value else None)
    except (binascii.Error, ValueError):
        return False
    return bool(raw) and sum(byte in _PRINTABLE for byte in raw) / len(raw) >= 0.9


def _classes(value: str) -> int:
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
    )


def _not_a_value(value: str) -> bool:
    """Placeholders, templates, sequences, file paths and dotted references."""
    if _TEMPLATED.search(value) or heuristic.is_sequential_string(value):
        return True
    tail = value.rsplit("/", 1)[-1]
    return ("/" in value and "." in tail) or bool(_REFERENCE.match(value))


# Placeholders: a word that says so, or a value in capitals alone (`YOUR_OLLAMA_CLOUD_KEY`).
_PLACEHOLDER = re.compile(r"(?i:your|example|placeholder|redacted|dummy|changeme)|^[A-Z_\-]+$")
_DEMO = re.compile(r"(?i)password|secret|passwd")


def _real_value(value: str, text: str, start: int) -> bool:
    """Not a placeholder (`YOUR_API_KEY`, `<token>`, `${TOKEN}`) of a credential-shaped slot."""
    return not (_PLACEHOLDER.search(value) or _TEMPLATED.search(value))


# A password slot of a template (`{password}`, `%(password)s`, `<password>`) or one already
# masked (`****`): not a password.
_URL_TEMPLATE = re.compile(r"\{[^{}]*\}|%\(\w+\)s|%s|<[^<>]*>|\*+|x+|X+")


def _url_password(value: str, text: str, start: int) -> bool:
    return _real_value(value, text, start) and not _URL_TEMPLATE.fullmatch(value)


def _path_like(value: str) -> bool:
    return value.startswith(("/", "./", "~/", "../")) or value.count("/") >= 3 or "//" in value


def _assigned_secret(value: str, text: str, start: int) -> bool:
    if value.endswith(("...", "…")):
        return False  # an elided example (`api_key: sk_test_abc123...`)
    value = value.rstrip(".,;")
    if len(value) < 12 or _not_a_value(value) or _path_like(value) or _PLACEHOLDER.search(value):
        return False
    if _DEMO.search(value):  # `secure_password123`: a sample in an example, not a secret
        return False
    if all(c in _HEX for c in value):
        return len(value) >= 16  # a hex value assigned to a secret name is a key
    return _classes(value) >= 2 and any(c.isdigit() for c in value) and _entropy(value) >= 3.0


def _high_entropy(value: str, text: str, start: int) -> bool:
    if not 20 <= len(value) <= 100 or _entropy(value) <= _ENTROPY.entropy_limit:
        return False
    if all(c in _HEX or c == "-" for c in value):
        return False  # hashes, uuids and hex ids
    if _classes(value) < 3 or heuristic.is_potential_uuid(value) or _path_like(value):
        return False
    if _not_a_value(value) or _PLACEHOLDER.search(value):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    if heuristic.is_likely_id_string(value, text[line_start : start + len(value)]):
        return False
    return not _decodes_to_text(value)


_QUOTED = _Rule(
    "high_entropy_string",
    re.compile(r"([\'\"])([A-Za-z0-9+/\\\-_=]+)(\1)"),
    ('"', "'"),
    2,
    _high_entropy,
)

# Specific shapes first: on equal starts the longer match wins, then the earlier rule
# (a bearer JWT is a bearer token).
_SPECIFIC: list[_Rule] = [
    *_rules("anthropic_key", own.AnthropicKeyDetector, ["sk-ant-"]),
    *_rules("openai_key", own.OpenAIKeyDetector, ["sk-"], check=_has_digit),
    *_rules("openai_key", openai.OpenAIDetector, ["T3BlbkFJ"]),
    *_rules(
        "stripe_key",
        own.StripeKeyDetector,
        ["sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"],
    ),
    *_rules("stripe_key", stripe.StripeDetector, ["k_live_"]),
    *_rules(
        "github_token",
        own.GitHubTokenDetector,
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    ),
    *_rules(
        "gitlab_token",
        gitlab_token.GitLabTokenDetector,
        [
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "GR1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
        ],
    ),
    *_rules(
        "aws_access_key_id", aws.AWSKeyDetector, ["AKIA", "ASIA", "ABIA", "ACCA", "A3T"], only=[0]
    ),
    *_rules("aws_secret_access_key", aws.AWSKeyDetector, ["aws"], group=1, only=[1]),
    *_rules("aws_secret_access_key", own.AwsSecretKeyDetector, ["secret"]),
    *_rules("google_api_key", own.GoogleApiKeyDetector, ["AIza"]),
    *_rules("huggingface_token", own.HuggingFaceTokenDetector, ["hf_"]),
    *_rules("slack_token", slack.SlackDetector, ["xox", "hooks.slack.com"]),
    *_rules("sendgrid_key", sendgrid.SendGridDetector, ["SG."]),
    *_rules("twilio_key", twilio.TwilioKeyDetector, ["AC", "SK"]),
    *_rules("discord_token", discord.DiscordBotTokenDetector, ["."]),
    *_rules("telegram_token", telegram_token.TelegramBotTokenDetector, [":"]),
    *_rules("mailchimp_key", mailchimp.MailchimpDetector, ["-us"]),
    *_rules("npm_token", npm.NpmDetector, ["_authtoken"], group=1),
    *_rules("pypi_token", pypi_token.PypiTokenDetector, ["pypi-"]),
    *_rules("square_oauth_secret", square_oauth.SquareOAuthDetector, ["sq0csp-"]),
    *_rules("azure_storage_key", azure_storage_key.AzureStorageKeyDetector, ["AccountKey="]),
    # The API-token shape only: the password shape (AP + 9 characters) matches words.
    *_rules("artifactory_token", artifactory.ArtifactoryDetector, ["AKC"], only=[0]),
    *_rules("bearer_token", own.BearerTokenDetector, ["bearer"], check=_real_value),
    *_rules("jwt", own.JwtDetector, ["eyJ"], check=_jwt_valid),
    *_rules("url_password", own.UrlPasswordDetector, ["://"], check=_url_password),
    *_rules("url_token", own.UrlTokenDetector, ["="], check=_real_value),
]
_GENERIC: list[_Rule] = [
    *_rules(
        "secret_assignment",
        own.AssignedSecretDetector,
        ["pass", "secret", "key", "token"],
        check=_assigned_secret,
    ),  # fmt: skip
    _QUOTED,
]

# A private key: the whole block, from its BEGIN line to its END line (or, cut short, to
# the end of its body). detect-secrets' plugin flags the BEGIN line only.
_KEY_BEGIN = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d:"
)
_KEY_END = re.compile(
    r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|Private-MAC: *[0-9a-f]+"
)
# A cut-short body: lines of base64 (or `Name: value` headers), up to a blank line.
_KEY_BODY = re.compile(r"(?:(?:\r?\n|\\r?\\n)[ \t]*(?:[A-Za-z0-9+/=]+|[A-Za-z\-]+: [^\n\\]*))+")
_KEY_SPAN = 64 * 1024  # an END further than this belongs to another block


def _private_keys(text: str) -> Iterator[Finding]:
    if "PRIVATE KEY" not in text and "PuTTY-User-Key-File" not in text:
        return
    position = 0
    while (begin := _KEY_BEGIN.search(text, position)) is not None:
        end = _KEY_END.search(text, begin.end(), begin.end() + _KEY_SPAN)
        if end is not None:
            stop = end.end()
        else:
            body = _KEY_BODY.match(text, begin.end())
            stop = body.end() if body else begin.end()
            if sum(c.isalnum() for c in text[begin.end() : stop]) < 40:
                position = begin.end()
                continue  # a header quoted in code or prose, not a key
        yield Finding("private_key", begin.start(), stop)
        position = stop


def _matches(rules: list[_Rule], text: str, lowered: str) -> Iterator[Finding]:
    present: dict[tuple[str, ...], bool] = {}  # the rules of one plugin share their needles
    # Case-blind patterns run on the lowered text when lowering kept every offset.
    same_offsets = len(lowered) == len(text)
    for rule in rules:
        if rule.needles not in present:
            present[rule.needles] = any(
                n in (lowered if n.islower() else text) for n in rule.needles
            )
        if not present[rule.needles]:
            continue
        blind = rule.lowered is not None and same_offsets
        pattern, haystack = (rule.lowered, lowered) if blind else (rule.pattern, text)
        for match in pattern.finditer(haystack):
            start, end = match.span(rule.group)
            if start < 0 or start == end:
                continue
            if rule.check is not None and not rule.check(text[start:end], text, start):
                continue
            yield Finding(rule.kind, start, end)


def _merge(found: list[Finding]) -> list[Finding]:
    """Overlapping findings become one (the first's kind): no piece of a secret is left."""
    ordered = sorted(found, key=lambda f: (f.start, -(f.end - f.start)))
    merged: list[Finding] = []
    for finding in ordered:
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            if finding.end > last.end:
                merged[-1] = Finding(last.kind, last.start, finding.end)
            continue
        merged.append(finding)
    return merged


def _overlaps(finding: Finding, kept: list[Finding]) -> bool:
    return any(finding.start < k.end and k.start < finding.end for k in kept)


def find_secrets(text: str) -> list[Finding]:
    """The secrets in `text`, in order, without overlaps."""
    if len(text) < 8:
        return []
    lowered = text.lower()
    specific = _merge([*_private_keys(text), *_matches(_SPECIFIC, text, lowered)])
    generic = [f for f in _matches(_GENERIC, text, lowered) if not _overlaps(f, specific)]
    return _merge(specific + generic) if generic else specific


def mask(text: str, findings: list[Finding], marker: str = MARKER) -> str:
    """`text` with each finding replaced by `marker` (formatted with its kind)."""
    pieces, position = [], 0
    for finding in findings:
        pieces.append(text[position : finding.start])
        pieces.append(marker.format(kind=finding.kind))
        position = finding.end
    pieces.append(text[position:])
    return "".join(pieces)


def mask_secrets(text: str, marker: str = MARKER) -> tuple[str, list[Finding]]:
    """(`text` with every secret masked, the findings in the original text)."""
    findings = find_secrets(text)
    return (mask(text, findings, marker) if findings else text), findings
