"""Words of prose and names of code, as the statements and the relation probes read them."""

from __future__ import annotations

import re

from compaction.summarizers.extract import EXTENSIONS

_WORD = re.compile(r"[a-z0-9][a-z0-9_'-]*[a-z0-9]", re.A)
# Identifier-shaped tokens; which of them are code is decided by `identifiers`.
_TOKEN = re.compile(r"(?<![\w$.-])[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(\()?", re.A)
_STOP_WORDS = """
    about above after again against also been before being below between both could does
    doing down during each from further have having here into just more most once only other
    over same should some such than that their them then there these they this those through
    under until very what when where which while will with would your yours ours were into
    it's let's i'll we'll i've we've i'm don't didn't doesn't isn't wasn't won't can't
    need needs want wants make sure okay also still even much many well like look looks
    please thanks thank going know think right good great lets yeah sure
"""
_STOP = frozenset(_STOP_WORDS.split())
# Words that say a clause, not what it is about ("Let me now check ..." -> "check ...").
_LEAD = re.compile(
    r"^(?:(?:ok(?:ay)?|now|next|great|perfect|good|first|then|so|also|finally|alright)[,!.]?\s+)*"
    r"(?:(?:let me|let's|i'll|i will|i need to|we need to|i'm going to|we'll|i should|now i)"
    r"\s+)?",
    re.I,
)


def content_words(text: str, limit: int | None = None) -> list[str]:
    """The lowercased words of 4+ characters that carry meaning, in order, once each."""
    found = [w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _STOP]
    unique = list(dict.fromkeys(found))
    return unique if limit is None else unique[:limit]


def identifiers(text: str) -> list[str]:
    """What in `text` is a code name: snake_case, camelCase, CONSTANT_CASE, dotted.names,
    and any name called with `(`; in order of first appearance, once each."""
    found: list[str] = []
    for match in _TOKEN.finditer(text):
        name, called = match.group(0).rstrip("("), bool(match.group(1))
        if len(name) < 4 or name.lower() in _STOP or _is_file_name(name):
            continue
        if called or _code_shaped(name):
            found.append(name)
    return list(dict.fromkeys(found))


def _is_file_name(name: str) -> bool:
    head, dot, extension = name.rpartition(".")
    return bool(dot and head) and extension.lower() in EXTENSIONS


def _code_shaped(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    if "_" in last.strip("_") or "." in name:
        return True
    if any(c.islower() for c in last[:1]) and any(c.isupper() for c in last[1:]):
        return True  # camelCase
    if last[:1].isupper() and any(c.isupper() for c in last[1:]) and any(c.islower() for c in last):
        return True  # PascalCase with two capitals: CacheStore (not "Error")
    return len(last) >= 4 and last.isupper() and last.isalpha()  # CONSTANT


def clause(text: str, max_words: int) -> str:
    """`text` as a short clause: leading filler ("Now let me") dropped, at most `max_words`
    words, an ellipsis when cut."""
    text = " ".join(text.split())
    text = _LEAD.sub("", text, count=1).rstrip(":")
    words = text.split()
    if len(words) <= max_words:
        return text
    return " ".join(words[:max_words]).rstrip(",;:") + "…"


# A sentence that chooses: what was taken, often against what.
CHOICE = re.compile(
    r"\b(?:instead of|rather than|switch(?:ed|ing)? to|go(?:ing)? with|went with|decided"
    r"|decide to|chose|choose|opted|settled on|(?:we'll|i'll|let's|we will|i will) use"
    r"|the fix is|the plan is|better to|prefer|replac(?:e|ed|ing) \S+ with"
    r"|rewr(?:ite|ote) \S+ to)\b",
    re.I,
)
# Where a sentence gives its reason, or names the option it did not take.
REASON = re.compile(
    r"\b(?:because|since|so that|due to|to avoid|otherwise|as it|as the|too slow|too many"
    r"|instead of|rather than|which means|the problem|the issue)\b",
    re.I,
)
REJECTED = re.compile(r"\b(?:instead of|rather than)\s+(.+)", re.I)
# A sentence that states a problem (the reason for the choice that follows it).
PROBLEM = re.compile(
    r"\b(?:error|fails?|failed|failing|broken|slow|timeout|timed out|can't|cannot|doesn't"
    r"|won't|not working|missing|problem|issue|wrong|conflict)\b",
    re.I,
)


def reason_of(sentences: list[str], n: int) -> str:
    """The reason given for the choice in sentence `n`: the part after its reason word, else
    the sentence before it when that one states a problem; "" when there is none."""
    said = REASON.search(sentences[n])
    if said:
        return sentences[n][said.start() :]
    if n and PROBLEM.search(sentences[n - 1]):
        return sentences[n - 1]
    return ""
