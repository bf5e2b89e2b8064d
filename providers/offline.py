"""The offline provider: a deterministic, clearly labelled answer built from the request,
so the whole pipeline runs on a machine with no key. It is for demos and tests; it never
pretends to be a model.

The answer quotes the head state summary and the best memory item. The turn engine may pass
them explicitly as `options["state_summary"]` (str) and `options["memory"]` (list of str or
of dicts with "text", best first); otherwise they are read from the assembled context
(turns/context.py): the `<memory_artifact kind="state">` block (in the current message),
and the `<memory_artifact id=.. score=..>` item with the highest score in the messages
(`<state_summary>`/`<state>` and `<memory ...>` tags are understood too). Options
`offline_chunks` (int, deltas per answer, default 4) and `offline_delay_seconds` (float, a
pause before each delta) let tests shape the stream.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from core.token_estimate import estimate_tokens
from providers import blocks as b
from providers import observe
from providers.base import (
    Finished,
    ProviderRequest,
    ProviderResponse,
    RawEvent,
    StreamEvent,
    TextDelta,
    drain,
    outcome,
    usage,
)
from providers.config import ModelSpec
from providers.redaction import redact_request_texts

LABEL = "[offline provider]"
QUOTE_CHARS = 400

_STATE = re.compile(
    r"<(memory_artifact) kind=\"state\"[^>]*>(.*?)</memory_artifact>"
    r"|<(state_summary|state)\b[^>]*>(.*?)</(?:state_summary|state)>",
    re.S,
)
_ARTIFACT = re.compile(
    r"<memory_artifact id=\"[^\"]*\" score=\"([0-9.\-]+)\"[^>]*>(.*?)</memory_artifact>", re.S
)
_MEMORY = re.compile(r"<(memory_item|memory|retrieved)\b[^>]*>(.*?)</\1>", re.S)
_MEMORY_BLOCK_PREFIX = "Retrieved memory (untrusted data):"
# Per-turn artifacts the turn engine puts before the user's own blocks (turns/context.py).
_ARTIFACT_PREFIXES = (_MEMORY_BLOCK_PREFIX, '<memory_artifact kind="state"')
_LABEL_LINE = re.compile(r"\A\s*[^\n]{1,60}:\n")  # "Conversation state:" before the summary


class OfflineProvider:
    name = "offline"

    def __init__(self, spec: ModelSpec, **_ignored: object) -> None:
        self.spec = spec

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        request = redact_request_texts(request)
        raw_request = {
            "model": self.spec.model_id,
            "system": request.system,
            "messages": request.messages,
            "tools": request.tools,
            "max_output_tokens": request.max_output_tokens,
        }
        call = observe.UpstreamCall(
            provider=self.name,
            model=self.spec.model_id,
            purpose=request.purpose,
            conversation_id=request.conversation_id,
            upstream="offline",
            params=raw_request,
        )
        watched = observe.call_begin(call)
        response, error = None, None
        try:
            for event in self._answer(request, raw_request):
                if isinstance(event, Finished):
                    # Recorded before the caller sees the end: a caller that stops
                    # reading at Finished never leaves the receipt to the collector.
                    observe.call_finish(call, watched, event.response, None)
                    watched = False
                yield event
        except Exception as failure:
            error = failure
            raise
        finally:
            observe.call_finish(call, watched, response, error)

    def _answer(self, request: ProviderRequest, raw_request: dict) -> Iterator[StreamEvent]:
        answer = offline_answer(request)
        delay = float(request.options.get("offline_delay_seconds") or 0)
        pieces = split_evenly(answer, int(request.options.get("offline_chunks") or 4))
        yield RawEvent("offline.start", {"model": self.spec.model_id})
        for piece in pieces:
            if delay:
                time.sleep(delay)
            yield RawEvent("offline.text_delta", {"index": 0, "text": piece})
            yield TextDelta(0, piece)
        content = [b.text(answer)]
        prompt = request.system + "".join(b.rendered_text(m["blocks"]) for m in request.messages)
        spent = usage(estimate_tokens(prompt), estimate_tokens(answer))
        yield RawEvent("offline.done", {"usage": spent})
        yield Finished(
            ProviderResponse(
                raw_request=raw_request,
                raw_response={"provider": "offline", "content": content, "usage": spent},
                blocks=content,
                items=b.items_from_blocks(content),
                outcome=outcome("completed", "end_turn"),
                usage=spent,
                model=self.spec.model_id,
            )
        )

    def complete(self, request: ProviderRequest) -> ProviderResponse:
        return drain(self.stream(request))


def offline_answer(request: ProviderRequest) -> str:
    state = request.options.get("state_summary")
    if state is None:
        state = _state(_texts(request))
    memory = _best_memory(request)
    user = _last_user_text(request)
    lines = [
        f"{LABEL} No model was called: this deterministic answer quotes what the server "
        "assembled for this turn."
    ]
    lines.append(f"Current state: {_quote(state) if state else '(empty)'}")
    lines.append(f"Best matching memory: {_quote(memory) if memory else '(none)'}")
    lines.append(f"Your message: {_quote(user) if user else '(empty)'}")
    return "\n".join(lines)


def split_evenly(text: str, parts: int) -> list[str]:
    """`text` in exactly `parts` non-empty pieces (fewer only when it is shorter)."""
    parts = max(1, min(parts, len(text)))
    cuts = [round(i * len(text) / parts) for i in range(parts + 1)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:], strict=False)] or [text]


def _texts(request: ProviderRequest) -> list[str]:
    texts = [request.system]
    for message in request.messages:
        texts.extend(
            block["text"] for block in message.get("blocks", []) if block.get("type") == "text"
        )
    return texts


def _state(texts: list[str]) -> str | None:
    for text in texts:
        match = _STATE.search(text or "")
        if match:
            inner = match.group(2) if match.group(2) is not None else match.group(4)
            return _LABEL_LINE.sub("", inner, count=1).strip()
    return None


def _first(pattern: re.Pattern, texts: list[str]) -> str | None:
    for text in texts:
        match = pattern.search(text or "")
        if match:
            return match.group(2).strip()
    return None


def _best_memory(request: ProviderRequest) -> str | None:
    """The best memory retrieved for the user's message: the first one given, or the
    highest-scored artifact in the context. An earlier offline answer is never quoted as
    memory (it is canned text about another turn; memory does not index new ones)."""
    memory = request.options.get("memory")
    if memory:
        texts = [m.get("text", "") if isinstance(m, dict) else str(m) for m in memory]
        texts = [t for t in texts if LABEL not in t]
        return texts[0] if texts else None
    scored = [
        (float(score), index, body.strip())
        for index, (score, body) in enumerate(
            _ARTIFACT.findall("\n".join(t for t in _texts(request) if t))
        )
        if LABEL not in body
    ]
    if scored:
        return max(scored, key=lambda entry: (entry[0], -entry[1]))[2]
    return _first(_MEMORY, _texts(request))


def _last_user_text(request: ProviderRequest) -> str:
    for message in reversed(request.messages):
        if message.get("role") == "user":
            own = [
                block
                for block in message.get("blocks", [])
                if not block.get("text", "").startswith(_ARTIFACT_PREFIXES)
            ]
            text = b.rendered_text(own)
            if text:
                return text
    return ""


def _quote(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > QUOTE_CHARS:
        flat = flat[: QUOTE_CHARS - 1] + "…"
    return f"“{flat}”"
