"""The outbound redaction hook (SRD 14.1): every prompt text an adapter sends (system,
text blocks, tool results) goes through one function str -> str first.

LCM_REDACTION_HOOK names it as a dotted path (default `providers.redaction.redact_secrets`;
empty turns redaction off). The default masks what the ingest scanner finds
(`core.secret_scan`, the same detector: provider and cloud keys, tokens, private keys,
credentials in URLs, high-entropy strings), each as `[REDACTED:<kind>]`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import os
from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured

from core.secret_scan import mask_secrets
from providers.blocks import rendered_text

DEFAULT_HOOK = "providers.redaction.redact_secrets"
OUTBOUND_MARKER = "[REDACTED:{kind}]"


def redact_secrets(text: str) -> str:
    """`text` with every recognised secret replaced by `[REDACTED:<kind>]`."""
    return mask_secrets(text, OUTBOUND_MARKER)[0]


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
