"""The outbound redaction hook (SRD 14.1): every prompt text an adapter sends (system,
text blocks, tool results) goes through one function str -> str first.

LCM_REDACTION_HOOK names it as a dotted path (default `providers.redaction.redact_secrets`;
empty turns redaction off). The default masks common secret shapes: Anthropic/OpenAI keys
(`sk-ant-...`, `sk-...`), AWS access key ids and secret keys, bearer tokens, GitHub tokens
and PEM private keys, each as `[REDACTED:<kind>]`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import os
import re
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

from providers.blocks import rendered_text

DEFAULT_HOOK = "providers.redaction.redact_secrets"

_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
            re.S,
        ),
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{8,}")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}")),
    ("github_token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})")),
    ("aws_access_key_id", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    (
        "aws_secret_access_key",
        re.compile(
            r"(?i)(aws_secret_access_key|aws_secret_key|secret_access_key)(\s*[:=]\s*[\"']?)"
            r"[A-Za-z0-9/+=]{40}"
        ),
    ),
    ("bearer_token", re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{16,}=*")),
)


# Substrings without which a pattern cannot match: a cheap test that skips most regex
# passes over ordinary prose (lower-case needles are tested against the lowered text).
_NEEDLES = {
    "private_key": ("PRIVATE KEY",),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "github_token": ("gh", "github_pat_"),
    "aws_access_key_id": ("AKIA", "ASIA"),
    "aws_secret_access_key": ("secret",),
    "bearer_token": ("bearer",),
}


def redact_secrets(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`."""
    lowered = text.lower()
    for kind, pattern in _PATTERNS:
        needles = _NEEDLES[kind]
        haystack = lowered if needles[0].islower() else text
        if not any(needle in haystack for needle in needles):
            continue
        if pattern.groups >= 2:
            text = pattern.sub(lambda m, k=kind: m.group(1) + m.group(2) + f"[REDACTED:{k}]", text)
        elif pattern.groups == 1:
            text = pattern.sub(lambda m, k=kind: m.group(1) + f"[REDACTED:{k}]", text)
        else:
            text = pattern.sub(f"[REDACTED:{kind}]", text)
        lowered = text.lower()
    return text


def _identity(text: str) -> str:
    return text


@functools.lru_cache(maxsize=8)
def _load(path: str) -> Callable[[str], str]:
    if not path:
        return _identity
    module_name, _, attribute = path.rpartition(".")
    try:
        hook = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as error:
        raise ImproperlyConfigured(
            f"LCM_REDACTION_HOOK={path!r} is invalid: {error.__class__.__name__}: {error}"
        ) from None
    if not callable(hook):
        raise ImproperlyConfigured(f"LCM_REDACTION_HOOK={path!r} is not callable")
    return hook


def redaction_hook() -> Callable[[str], str]:
    """The configured hook (read from the environment at call time)."""
    return _load(os.environ.get("LCM_REDACTION_HOOK", DEFAULT_HOOK).strip())


def redact_blocks(blocks: list[dict], hook: Callable[[str], str]) -> list[dict]:
    out = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            block = {**block, "text": hook(block.get("text", ""))}
        elif kind == "tool_result":
            block = {**block, "content": redact_blocks(block.get("content") or [], hook)}
        out.append(block)
    return out


def redact_request_texts(request):
    """A copy of a ProviderRequest whose system, text blocks and tool results went through
    the hook (tool_use inputs and images are not prompt text and pass unchanged)."""
    hook = redaction_hook()
    clone = copy.copy(request)
    clone.system = hook(request.system or "")
    if getattr(request, "cache", None) is not None:
        parts = tuple(hook(part) for part in request.cache.system_parts)
        clone.cache = dataclasses.replace(request.cache, system_parts=parts)
    clone.messages = []
    for message in request.messages:
        redacted = redact_blocks(message.get("blocks", []), hook)
        clone.messages.append(
            {**message, "blocks": redacted, "rendered_text": rendered_text(redacted)}
        )
    return clone
