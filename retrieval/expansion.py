"""Sub-agent expansion: answer a focused question about compacted history under a grant.

1. Resolve the targets: the given summary ids (through the access checkpoint), or what a
   full-text grep for `query` finds (summary hits, and the summaries covering message hits).
2. Create a delegation grant: those conversations and summaries, a token cap, an expiry.
3. With a model (LCM_EXPANSION_PROVIDER_MODEL naming any configured model, or else
   LCM_EXPANSION_MODEL on Anthropic when ANTHROPIC_API_KEY is set): a bounded tool loop
   through the provider layer in which the model may call only lcm_describe and
   lcm_expand inside the grant. Without one (or with the `offline` model): the bounded
   excerpt a model would have read (offline mode), so clients still work.
4. Revoke the grant, whatever happened.

No database transaction is open during a model call: every grant write is its own
short statement (see retrieval.services).
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field

from django.conf import settings

from conversations.archive_port import hydrate_messages
from conversations.models import Message, Summary
from conversations.selectors import conversation_get_for_user, conversations_visible_to
from core.api.errors import InvalidInput, NotFound, Unavailable
from core.tool_result import ToolResult
from receipts.context import call_context
from receipts.items import ItemRef
from retrieval import services
from retrieval.grant_tools import tool_call_for_grant
from retrieval.grep import GrepRequest, grep_for_user
from retrieval.metrics import observe_expand_since
from retrieval.models import DelegationGrant
from retrieval.selectors import MAX_EXPAND_DEPTH
from retrieval.tool_definitions import SUBAGENT_TOOL_DEFINITIONS

QUERY_HITS = 20
PREVIEW_CHARS = 400
_SUMMARY_ID = re.compile(r"sum_[0-9a-f]{16}")

SYSTEM_PROMPT = """You answer one question about the compacted history of a conversation.
You can read it only through two tools: lcm_describe (what a summary covers, cheap) and
lcm_expand (the summaries and original messages below a summary). Your access is limited
to the summaries listed in the question and what lies below them, and to a token budget;
requests beyond it are cut or refused. Start from the listed summaries, expand only what
the question needs, prefer include_messages when exact wording, numbers or errors matter.
Answer concisely (at most {max_answer_tokens} tokens), state facts exactly as the sources
say, and cite the ids (sum_...) you relied on. If the history does not answer the
question, say so."""


@dataclass(frozen=True)
class ExpansionRequest:
    prompt: str
    summary_ids: list[str] | None = None
    query: str | None = None
    conversation_id: int | None = None
    max_answer_tokens: int | None = None
    token_cap: int | None = None
    max_depth: int | None = None

    def validate(self) -> None:
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidInput("prompt must be a non-empty string", extra={"field": "prompt"})
        if not self.summary_ids and not (self.query and self.query.strip()):
            raise InvalidInput(
                "give summary_ids or a query to find them", extra={"field": "summary_ids"}
            )
        if self.max_answer_tokens is not None and not 50 <= self.max_answer_tokens <= 32_000:
            raise InvalidInput(
                "max_answer_tokens must be from 50 to 32000",
                extra={"field": "max_answer_tokens"},
            )
        if self.token_cap is not None and not 1 <= self.token_cap <= 1_000_000:
            raise InvalidInput("token_cap must be from 1 to 1000000", extra={"field": "token_cap"})
        if self.max_depth is not None and not 1 <= self.max_depth <= MAX_EXPAND_DEPTH:
            raise InvalidInput(
                f"max_depth must be from 1 to {MAX_EXPAND_DEPTH}", extra={"field": "max_depth"}
            )


@dataclass
class Targets:
    summaries: list[Summary]
    message_hits: list[dict]  # grep hits on messages, in relevance order

    @property
    def conversation_ids(self) -> list[int]:
        ids = {s.conversation_id for s in self.summaries}
        ids |= {h["conversation_id"] for h in self.message_hits}
        return sorted(ids)


def model_configured() -> bool:
    name = settings.LCM_EXPANSION_PROVIDER_MODEL
    if name:
        return name != "offline"
    return bool(os.environ.get("ANTHROPIC_API_KEY"))


def expansion_model(max_answer: int):
    """The model spec of the tool loop: the configured model named by
    LCM_EXPANSION_PROVIDER_MODEL, else LCM_EXPANSION_MODEL on Anthropic. An unknown name or
    a missing key is a 503 naming the setting or the variable, before anything is granted."""
    from providers.config import ModelSpec, model_get, require_key
    from providers.errors import ModelConfigError

    name = settings.LCM_EXPANSION_PROVIDER_MODEL
    if not name:
        return ModelSpec(
            "expansion",
            "anthropic",
            settings.LCM_EXPANSION_MODEL,
            200_000,
            max_answer,
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
        )
    try:
        spec = model_get(name)
        require_key(spec)
    except ModelConfigError as error:
        raise Unavailable(
            f"LCM_EXPANSION_PROVIDER_MODEL: {error.message}", code=error.code
        ) from None
    return spec


def _resolve_targets(*, user, request: ExpansionRequest) -> Targets:
    visible = conversations_visible_to(user)
    if request.conversation_id is not None:
        visible = visible.filter(
            pk=conversation_get_for_user(user=user, conversation_id=request.conversation_id).pk
        )
    summary_ids = list(dict.fromkeys(request.summary_ids or []))
    message_hits: list[dict] = []
    if request.query and request.query.strip():
        hits = grep_for_user(
            user=user,
            request=GrepRequest(
                query=request.query,
                mode="full_text",
                scope="both",
                conversation_id=request.conversation_id,
                limit=QUERY_HITS,
                sort="relevance",
            ),
        )
        for hit in hits:
            if hit["type"] == "summary":
                summary_ids.append(hit["id"])
            else:
                message_hits.append(hit)
                if hit["covered_by"]:
                    summary_ids.append(hit["covered_by"])
        summary_ids = list(dict.fromkeys(summary_ids))
    found = {s.pk: s for s in Summary.objects.filter(pk__in=summary_ids, conversation__in=visible)}
    missing = [i for i in (request.summary_ids or []) if i not in found]
    if missing:
        raise NotFound(f"summary {missing[0]} not found", extra={"missing": missing})
    return Targets([found[i] for i in summary_ids if i in found], message_hits)


def expansion_run(*, user, request: ExpansionRequest) -> dict:
    request.validate()
    started = time.perf_counter()
    services.grant_sweep_expired()  # grants a crashed expansion left behind
    targets = _resolve_targets(user=user, request=request)
    mode = "model" if model_configured() else "offline"
    max_answer = request.max_answer_tokens or settings.LCM_EXPANSION_MAX_ANSWER_TOKENS
    spec = expansion_model(max_answer) if mode == "model" else None
    if not targets.summaries and not targets.message_hits:
        return {
            "answer": "Nothing in the stored history matches the request.",
            "cited_ids": [],
            "cited_message_ids": [],
            "tokens_used": 0,
            "mode": mode,
            "grant_id": None,
            "truncated": False,
        }
    grant = services.grant_create(
        owner=user,
        conversation_ids=targets.conversation_ids,
        summary_ids=[s.pk for s in targets.summaries],
        token_cap=request.token_cap or settings.LCM_MAX_EXPAND_TOKENS,
        max_depth=request.max_depth or MAX_EXPAND_DEPTH,
        prompt=request.prompt,
    )
    outcome = "failed"
    try:
        if mode == "model":
            result = _run_model(grant, targets, request, spec)
        else:
            result = _run_offline(grant, targets, request)
        outcome = "completed"
    finally:
        services.grant_revoke(grant_id=grant.pk, reason=outcome)
        observe_expand_since(started, kind=f"expansion_{mode}")
    grant.refresh_from_db()
    return {**result, "tokens_used": grant.tokens_used, "mode": mode, "grant_id": grant.pk}


# ---------------------------------------------------------------------------------------
# offline: the excerpt a model would have read


def _run_offline(grant: DelegationGrant, targets: Targets, request: ExpansionRequest) -> dict:
    lines = [f"Question: {request.prompt}", ""]
    cited_ids: list[str] = []
    cited_messages: list[int] = []
    truncated = False
    # What grep found comes first: for a query, those messages are the evidence. The
    # grant is this run's own, so what fits is counted here and charged in one UPDATE.
    hit_ids = [h["id"] for h in targets.message_hits]
    hit_rows = {m.pk: m for m in hydrate_messages(Message.objects.filter(pk__in=hit_ids))}
    remaining, evidence_tokens = grant.tokens_remaining, 0
    for hit in targets.message_hits:
        message = hit_rows[hit["id"]]
        if message.token_count > remaining:
            truncated = True
            break
        remaining -= message.token_count
        evidence_tokens += message.token_count
        where = f", covered by {hit['covered_by']}" if hit["covered_by"] else ""
        lines += [f"[message {message.pk}, seq {message.seq}, {message.role}{where}]"]
        lines += [message.content, ""]
        cited_messages.append(message.pk)
        if hit["covered_by"] and hit["covered_by"] not in cited_ids:
            cited_ids.append(hit["covered_by"])
    if cited_messages:
        services.grant_charge(grant=grant, tokens=evidence_tokens)
    for summary in targets.summaries:
        if grant.tokens_remaining < summary.token_count:
            truncated = True
            break
        services.grant_charge(grant=grant, tokens=summary.token_count)
        lines += [f"[summary {summary.pk}, {summary.kind}, depth {summary.depth}]", summary.content]
        lines.append("")
        if summary.pk not in cited_ids:
            cited_ids.append(summary.pk)
        if grant.tokens_remaining < 1:
            truncated = True
            break
        expanded = services.grant_expand(
            grant=grant, summary_id=summary.pk, depth=grant.max_depth, include_messages=True
        )
        truncated = truncated or expanded.truncated
        for child in expanded.summaries:
            lines += [f"[summary {child['id']}, {child['kind']}, depth {child['depth']}]"]
            lines += [child["content"], ""]
            if child["id"] not in cited_ids:
                cited_ids.append(child["id"])
        for message in expanded.messages:
            if message["id"] in cited_messages:
                continue
            lines += [f"[message {message['id']}, seq {message['seq']}, {message['role']}]"]
            lines += [message["content"], ""]
            cited_messages.append(message["id"])
    return {
        "answer": "\n".join(lines).strip(),
        "cited_ids": cited_ids,
        "cited_message_ids": cited_messages,
        "truncated": truncated,
    }


# ---------------------------------------------------------------------------------------
# model: a bounded tool loop through the provider layer (providers.registry.provider_for)


def _opening(targets: Targets, request: ExpansionRequest) -> str:
    lines = [request.prompt, "", "Summaries you may read (and everything below them):"]
    for s in targets.summaries:
        preview = " ".join(s.content.split())[:PREVIEW_CHARS]
        lines.append(
            f"- {s.pk}: {s.kind}, depth {s.depth}, {s.earliest_at:%Y-%m-%d %H:%M} to "
            f"{s.latest_at:%Y-%m-%d %H:%M}, {s.token_count} tokens. {preview}"
        )
    if targets.message_hits:
        lines += ["", "Messages a search found (expand the covering summary to read them):"]
        for hit in targets.message_hits:
            lines.append(
                f"- message {hit['id']} (seq {hit['seq']}, covered by "
                f"{hit['covered_by'] or 'nothing: it is in the active context'}): {hit['snippet']}"
            )
    return "\n".join(lines)


def _run_model(grant: DelegationGrant, targets: Targets, request: ExpansionRequest, spec) -> dict:
    # The provider layer builds the client from the environment, retries 429/529/5xx
    # honouring retry-after and maps errors; this loop owns the tools.
    from providers import blocks
    from providers.registry import provider_for

    max_answer = request.max_answer_tokens or settings.LCM_EXPANSION_MAX_ANSWER_TOKENS
    max_calls = settings.LCM_EXPANSION_MAX_TOOL_CALLS
    ask = _asker(
        provider_for(spec, timeout=settings.LCM_SUMMARY_TIMEOUT_SECONDS),
        spec,
        SYSTEM_PROMPT.format(max_answer_tokens=max_answer),
        max_answer,
    )
    messages: list[dict] = [blocks.message("user", _opening(targets, request))]
    reads = _Reads(seen_ids={s.pk for s in targets.summaries})
    calls = 0
    usage = {"input_tokens": 0, "output_tokens": 0}
    while True:
        with call_context(**_receipt_context(grant, targets, reads)):
            response = ask(messages, tools_allowed=calls < max_calls)
        usage["input_tokens"] += response.usage["input_tokens"] or 0
        usage["output_tokens"] += response.usage["output_tokens"] or 0
        tool_uses = [b for b in response.blocks if b["type"] == "tool_use"]
        if response.outcome["reason"] != "tool_use" or not tool_uses or calls > max_calls:
            break
        messages.append(blocks.message("assistant", response.blocks))
        results = []
        for block in tool_uses:
            calls += 1
            outcome = _tool_outcome(grant, block, reads, call=calls, max_calls=max_calls)
            results.append(blocks.tool_result(block["id"], outcome.content, outcome.is_error))
        messages.append(blocks.message("user", results))
    answer = blocks.rendered_text(response.blocks).strip()
    cited = [i for i in dict.fromkeys(_SUMMARY_ID.findall(answer)) if i in reads.seen_ids]
    return {
        "answer": answer,
        "cited_ids": cited or list(dict.fromkeys(reads.summary_ids)),
        "cited_message_ids": reads.message_ids,
        "truncated": False,
        "tool_calls": calls,
        "model_usage": usage,
    }


def _receipt_context(grant: DelegationGrant, targets: Targets, reads: _Reads) -> dict:
    """What an expansion call's receipt names (docs/receipts.md): the summaries it was
    offered, then what its tool loop read so far."""
    conversations = list(grant.conversation_ids or [])
    targets_ids = [s.pk for s in targets.summaries]
    read_summaries = [i for i in dict.fromkeys(reads.summary_ids) if i not in targets_ids]
    return {
        "site": "expansion",
        "conversation_id": conversations[0] if len(conversations) == 1 else None,
        "items": [
            *(ItemRef(kind="summary", id=i, reason="expansion") for i in targets_ids),
            *(ItemRef(kind="summary", id=i, reason="tool_loop") for i in read_summaries),
            *(
                ItemRef(kind="message", id=i, reason="tool_loop")
                for i in dict.fromkeys(reads.message_ids)
            ),
        ],
        "source": f"grant:{grant.pk}",
    }


def _asker(provider, spec, system: str, max_answer: int):
    """`ask(messages, tools_allowed=)`: one model call of the loop; a provider failure is
    a 503 naming the expansion model."""
    from providers.base import ProviderRequest
    from providers.errors import ModelConfigError, ProviderError

    def ask(messages: list[dict], *, tools_allowed: bool):
        # The loop answers several tool calls of one turn, so parallel use stays allowed;
        # once the call budget is spent the model must answer.
        options: dict = {"disable_parallel_tool_use": False, "parallel_tool_calls": True}
        if not tools_allowed:
            options = {"tool_choice": "none"}
        try:
            return provider.complete(
                ProviderRequest(
                    model=spec,
                    system=system,
                    messages=messages,
                    tools=SUBAGENT_TOOL_DEFINITIONS,
                    max_output_tokens=max_answer,
                    options=options,
                    purpose="expansion",
                )
            )
        except (ProviderError, ModelConfigError) as error:
            raise Unavailable(
                f"the expansion model failed: {error}", code="expansion_model_failed"
            ) from None

    return ask


def _tool_outcome(
    grant: DelegationGrant, block: dict, reads: _Reads, *, call: int, max_calls: int
) -> ToolResult:
    """The result of the sub-agent's `call`-th tool call (a refusal past the budget)."""
    if call > max_calls:
        return ToolResult.error(
            f"tool call budget of {max_calls} calls is used up: answer now with what you have read"
        )
    outcome = tool_call_for_grant(grant=grant, name=block["name"], input=block["input"])
    if not outcome.is_error:
        reads.note(block["name"], outcome.content)
    return outcome


@dataclass
class _Reads:
    """What the sub-agent read: the summary ids it may cite (`seen_ids`: the targets and
    what its reads showed it), and the summaries and messages it did read."""

    seen_ids: set[str]
    summary_ids: list[str] = field(default_factory=list)
    message_ids: list[int] = field(default_factory=list)

    def note(self, name: str, content: str) -> None:
        data = json.loads(content)
        if name == "lcm_describe" and data.get("type") == "summary":
            self.summary_ids.append(data["id"])
            self.seen_ids.add(data["id"])
            self.seen_ids.update(p["id"] for p in data["parents"])
        elif name == "lcm_expand":
            self.summary_ids.append(data["summary_id"])
            self.seen_ids.add(data["summary_id"])
            self.seen_ids.update(child["id"] for child in data["summaries"])
            self.message_ids.extend(
                m["id"] for m in data["messages"] if m["id"] not in self.message_ids
            )
