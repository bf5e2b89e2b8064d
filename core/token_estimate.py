"""Token estimation: about 4 characters per token for Latin text, one token per CJK
character, two per emoji or other astral-plane symbol.

The estimator is replaceable (`LCM_TOKEN_ESTIMATOR`, a dotted path to a `str -> int`
function); `estimate()` is what the rest of the code calls.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import lru_cache

from django.conf import settings
from django.utils.module_loading import import_string

# CJK ideographs, kana, hangul, and full-width forms: roughly a token each.
_CJK = re.compile(
    "[\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0002fa1f]"
)
# Astral-plane symbols (emoji and the like), excluding the CJK extension planes above.
_ASTRAL = re.compile("[\U00010000-\U0001ffff\U00030000-\U0010ffff]")


def estimate_tokens(text: str) -> int:
    """The default estimator; exact enough for budgeting, and cheap (no tokenizer)."""
    if not text:
        return 0
    if text.isascii():
        return math.ceil(len(text) / 4)
    cjk = len(_CJK.findall(text))
    astral = len(_ASTRAL.findall(text))
    rest = len(text) - cjk - astral
    return cjk + 2 * astral + math.ceil(rest / 4)


# Where the default estimator lived before (a configuration written then keeps working):
# before the kernel package existed, and before the module was named for what it does.
MOVED_ESTIMATORS = {
    "conversations.tokens.estimate_tokens": "core.token_estimate.estimate_tokens",
    "core.tokens.estimate_tokens": "core.token_estimate.estimate_tokens",
}


@lru_cache(maxsize=8)
def _load(path: str) -> Callable[[str], int]:
    return import_string(MOVED_ESTIMATORS.get(path, path))


def estimate(text: str) -> int:
    """Estimate with the configured estimator."""
    return int(_load(settings.LCM_TOKEN_ESTIMATOR)(text))
