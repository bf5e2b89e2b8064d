"""The librarian: writes the next branch state from the head state and one turn (SRD 10).

Contract: pinned facts are kept verbatim (they live on the state row and are re-read from
the head at commit time, see turns/branches.py); artifacts (paths, symbols, ids, URLs,
errors), decisions and constraints are kept; the summary stays within
LCM_STATE_TARGET_TOKENS.

Two writers, one contract:
- the deterministic librarian (no model; also the SRD 10.3 fallback) composes the state
  from three sections: decisions and constraints, artifacts, recent exchanges, trimmed
  oldest first within fixed shares of the target;
- the model librarian (LCM_LIBRARIAN_MODEL, when its key is set) is asked for a summary
  that names the required entities; an entity check compares before and after, a miss is
  retried once naming the missing entities, then the deterministic librarian writes it.

`shrink_summary` is the separate "shrink summary" step of the context shrinker (SRD 10.4).
"""

from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass, field

from django.conf import settings

from compaction.guard import DatabaseGuard
from compaction.summarizers.extract import score_sentences, sentences, split_code
from conversations.models import Message
from core.token_estimate import estimate
from providers import blocks as B
from providers.base import ProviderRequest
from providers.config import api_key, model_get
from providers.registry import provider_for
from receipts.context import call_context
from receipts.items import ItemRef

logger = logging.getLogger("lcm.turns")

SCHEMA = 1
DECISIONS = "## Decisions and constraints"
ARTIFACTS = "## Artifacts"
RECENT = "## Recent exchanges"
SECTIONS = (DECISIONS, ARTIFACTS, RECENT)
# Shares of the target each section may use (recent exchanges get the rest).
DECISION_SHARE, ARTIFACT_SHARE = 0.45, 0.25
MAX_DECISION_CHARS = 300
EXCERPT_CHARS = 240
RECENT_KEEP = 6
ENTITY_KINDS = ("path", "url", "ident", "fileref", "error")
_CONSTRAINT = re.compile(
    r"\b(must|must not|never|always|do not|don't|required|requirement|constraint|only use|"
    r"should not|shouldn't|may not|forbidden|deadline)\b",
    re.IGNORECASE,
)

LIBRARIAN_SYSTEM = (
    "You are the librarian of a long conversation. You maintain a bounded working-memory "
    "summary of a branch. Rewrite the summary to include the new exchange. Rules: keep "
    "every listed artifact (paths, symbols, identifiers, URLs, errors) spelled exactly; "
    "keep every decision and constraint; do not restate the pinned facts (they are kept "
    "separately, verbatim); stay under the token target; write plain text with the "
    f"sections '{DECISIONS}', '{ARTIFACTS}' and '{RECENT}'. Output only the summary."
)
SHRINK_SYSTEM = (
    "You shrink a working-memory summary to fit a token budget. Keep every decision, "
    "constraint and artifact (paths, symbols, identifiers) spelled exactly; drop narration "
    "and older exchanges first. Output only the shorter summary."
)


@dataclass
class Parsed:
    decisions: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    recent: list[str] = field(default_factory=list)


@dataclass
class LibrarianResult:
    summary: str
    info: dict  # {"writer", "validation", "retries", "fallback", "missing", "target_tokens", ...}


def parse_summary(summary: str) -> Parsed:
    """The sections of a summary this librarian wrote (anything else counts as decisions)."""
    parsed = Parsed()
    target = parsed.decisions
    for line in summary.splitlines():
        stripped = line.strip()
        if stripped == DECISIONS:
            target = parsed.decisions
        elif stripped == ARTIFACTS:
            target = parsed.artifacts
        elif stripped == RECENT:
            target = parsed.recent
        elif stripped:
            item = stripped[2:] if stripped.startswith("- ") else stripped
            if target is parsed.artifacts:
                item = item.strip("`")
            target.append(item)
    return parsed


def _dedup(items: list[str]) -> list[str]:
    """Items without repeats (case and spacing ignored), first spelling kept."""
    seen: dict[str, str] = {}
    for item in items:
        key = " ".join(item.split()).lower()
        if key and key not in seen:
            seen[key] = item
    return list(seen.values())


def extract(text: str) -> tuple[list[str], list[str]]:
    """(decisions and constraints, artifacts) of a text, in order of appearance."""
    prose, blocks = split_code(text)
    units = sentences(prose)
    decisions: list[str] = []
    artifacts: list[str] = []
    for unit, found in zip(units, score_sentences(units), strict=True):
        if "decision" in found.kinds or _CONSTRAINT.search(unit):
            decisions.append(unit[:MAX_DECISION_CHARS])
        artifacts.extend(entity for kind, entity in found.entities if kind in ENTITY_KINDS)
    for block in blocks:
        artifacts.extend(block.names)
    return decisions, list(dict.fromkeys(artifacts))


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


def _fit(items: list[str], budget: int, render) -> list[str]:
    """The newest items (the end of `items`) that fit `budget` tokens, in original order."""
    kept: list[str] = []
    used = 0
    for item in reversed(items):
        cost = estimate(render(item)) + 1
        if used + cost > budget:
            break
        kept.append(item)
        used += cost
    return list(reversed(kept))


def compose(parsed: Parsed, target_tokens: int) -> str:
    """Deterministic layout within `target_tokens`: each section keeps its newest items."""
    decisions = _fit(parsed.decisions, int(target_tokens * DECISION_SHARE), lambda d: f"- {d}")
    artifacts = _fit(parsed.artifacts, int(target_tokens * ARTIFACT_SHARE), lambda a: f"- `{a}`")
    used = estimate(_render(decisions, artifacts, []))
    recent = _fit(
        parsed.recent[-RECENT_KEEP:], max(0, target_tokens - used - 8), lambda r: f"- {r}"
    )
    text = _render(decisions, artifacts, recent)
    while estimate(text) > target_tokens and (recent or artifacts or decisions):
        for section in (recent, artifacts, decisions):  # oldest of the least important first
            if section:
                section.pop(0)
                break
        text = _render(decisions, artifacts, recent)
    return text


def _render(decisions: list[str], artifacts: list[str], recent: list[str]) -> str:
    lines: list[str] = []
    if decisions:
        lines += [DECISIONS, *(f"- {d}" for d in decisions)]
    if artifacts:
        lines += [ARTIFACTS, *(f"- `{a}`" for a in artifacts)]
    if recent:
        lines += [RECENT, *(f"- {r}" for r in recent)]
    return "\n".join(lines)


def turn_texts(turn) -> tuple[str, str]:
    """(user text, assistant text) of a turn; tool calls are named in the assistant text."""
    user = turn.user_message.get("rendered_text", "")
    answer = turn.final_assistant_message or {}
    parts = [answer.get("rendered_text", "")]
    for block in answer.get("blocks") or []:
        if block.get("type") == "tool_use":
            parts.append(f"[tool {block.get('name')}]")
    return user, " ".join(p for p in parts if p)


def deterministic_state(
    *, head_summary: str, user: str, answer: str, turn_seq: int, target_tokens: int
) -> tuple[str, Parsed]:
    """The deterministic librarian (and SRD 10.3 fallback): carry the previous sections,
    add this exchange's decisions and artifacts and a short excerpt, trim to budget."""
    previous = parse_summary(head_summary)
    new_decisions, new_artifacts = extract(f"{user}\n{answer}")
    merged = Parsed(
        decisions=_dedup([*previous.decisions, *new_decisions]),
        artifacts=list(dict.fromkeys([*previous.artifacts, *new_artifacts])),
        recent=[
            *previous.recent,
            f"Turn {turn_seq} — user: {_excerpt(user)} | assistant: {_excerpt(answer)}",
        ],
    )
    return compose(merged, target_tokens), merged


def missing_entities(summary: str, *, artifacts: list[str], decisions: list[str]) -> list[str]:
    """Entity check: required artifacts spelled exactly; each decision by most of its words."""
    lowered = summary.lower()
    missing = [a for a in artifacts if a not in summary]
    for decision in decisions:
        words = [w for w in re.findall(r"\w{4,}", decision.lower())]
        if words and sum(w in lowered for w in words) * 2 < len(words):
            missing.append(decision)
    return missing


def _librarian_provider():
    """(spec, provider) of LCM_LIBRARIAN_MODEL when it can be called (a real model whose
    key is set), else None: the deterministic librarian writes the state."""
    name = settings.LCM_LIBRARIAN_MODEL
    if not name:
        return None
    try:
        spec = model_get(name)
    except Exception:  # an unknown model: the deterministic librarian writes
        return None
    if spec.provider == "offline" or api_key(spec) is None:
        return None
    return spec, provider_for(spec, guard=DatabaseGuard())


def _ask(
    spec, provider, *, system: str, prompt: str, max_tokens: int, conversation_id: int | None
) -> str:
    response = provider.complete(
        ProviderRequest(
            model=spec,
            system=system,
            messages=[B.message("user", prompt)],
            tools=[],
            max_output_tokens=max_tokens,
            purpose="librarian",
            conversation_id=conversation_id,
        )
    )
    if response.outcome.get("status") != "completed":
        raise RuntimeError(f"librarian call ended {response.outcome}")
    return B.rendered_text(response.blocks).strip()


def _prompt(
    *,
    head_summary: str,
    pins: list[dict],
    user: str,
    answer: str,
    turn_seq: int,
    artifacts: list[str],
    decisions: list[str],
    target: int,
    missing: list[str] = (),
) -> str:
    pinned = "\n".join(f"- {p['text']}" for p in pins) or "(none)"
    lines = [
        f"Token target: {target}.",
        "Pinned facts (kept separately, verbatim; do not restate):",
        pinned,
        "Current summary:",
        head_summary or "(empty)",
        f"New exchange (turn {turn_seq}):",
        f"User: {user}",
        f"Assistant: {answer}",
        "Artifacts that must appear spelled exactly: " + (", ".join(artifacts) or "(none)"),
        "Decisions and constraints that must be kept:",
        *(f"- {d}" for d in decisions),
    ]
    if missing:
        lines.append(
            "Your previous summary missed these; it must include them: " + "; ".join(missing)
        )
    return "\n".join(lines)


def _report(
    info: dict,
    writer: str,
    *,
    model: str = "",
    validation: str = "pass",
    retries: int = 0,
    fallback: bool = False,
    missing: list[str] | tuple[str, ...] = (),
    error: str | None = None,
) -> dict:
    """The librarian report stored on the state: `info`, then who wrote it and how the
    entity check went."""
    report = {**info, "writer": writer}
    if model:
        report["model"] = model
    report |= {
        "validation": validation,
        "retries": retries,
        "fallback": fallback,
        "missing": list(missing),
    }
    if error is not None:
        report["error"] = error
    return report


def librarian_for_turn(*, turn, head, deterministic: bool = False) -> LibrarianResult:
    """The next state summary for `turn` on top of `head` (no transaction is open here);
    `deterministic`: the deterministic librarian writes it whatever is configured."""
    target = settings.LCM_STATE_TARGET_TOKENS
    user, answer = turn_texts(turn)
    fallback, merged = deterministic_state(
        head_summary=head.summary,
        user=user,
        answer=answer,
        turn_seq=turn.turn_seq,
        target_tokens=target,
    )
    # What the deterministic layout kept is what the contract requires of any writer.
    kept = parse_summary(fallback)
    info = {
        "schema": SCHEMA,
        "target_tokens": target,
        "entities_before": len(merged.artifacts) + len(merged.decisions),
        "required": len(kept.artifacts) + len(kept.decisions),
    }
    model = None if deterministic else _librarian_provider()
    if model is None:
        return LibrarianResult(fallback, _report(info, "deterministic"))
    prompt = functools.partial(
        _prompt,
        head_summary=head.summary,
        pins=head.pinned_facts,
        user=user,
        answer=answer,
        turn_seq=turn.turn_seq,
        artifacts=kept.artifacts,
        decisions=kept.decisions,
        target=target,
    )
    return _model_state(turn, model, prompt, kept=kept, fallback=fallback, info=info)


def _model_state(
    turn, model, prompt, *, kept: Parsed, fallback: str, info: dict
) -> LibrarianResult:
    """The model librarian's summary when it passes the entity check (one retry naming
    what it missed); else the deterministic `fallback`, with the reason in the report."""
    spec, provider = model
    target = info["target_tokens"]
    missing: list[str] = []
    for attempt in range(2):
        try:
            with call_context(**_receipt_context(turn)):
                text = _ask(
                    spec,
                    provider,
                    system=LIBRARIAN_SYSTEM,
                    prompt=prompt(missing=missing),
                    max_tokens=target * 2,
                    conversation_id=turn.branch.conversation_id,
                )
        except Exception as error:  # provider down, guard closed: the fallback writes it
            logger.warning("librarian model call failed for turn %s: %s", turn.pk, error)
            report = _report(
                info,
                "deterministic",
                model=spec.name,
                validation="fail",
                retries=attempt,
                fallback=True,
                error=str(error)[:300],
            )
            return LibrarianResult(fallback, report)
        missing = missing_entities(text, artifacts=kept.artifacts, decisions=kept.decisions)
        if estimate(text) > target:
            missing.append(f"(over the {target}-token target)")
        if not missing:
            return LibrarianResult(text, _report(info, "model", model=spec.name, retries=attempt))
    report = _report(
        info,
        "deterministic",
        model=spec.name,
        validation="fail",
        retries=1,
        fallback=True,
        missing=missing[:20],
    )
    return LibrarianResult(fallback, report)


def _receipt_context(turn) -> dict:
    """What the librarian's receipt names (docs/receipts.md): the state it folds the turn
    into, and the turn's messages as the store holds them."""
    conversation_id = turn.branch.conversation_id
    messages = Message.objects.filter(
        conversation_id=conversation_id, external_id__startswith=f"turn:{turn.pk}:"
    ).order_by("seq")
    return {
        "site": "librarian",
        "conversation_id": conversation_id,
        "items": [
            ItemRef(kind="state", id=turn.branch.head_state_id, reason="librarian"),
            *(
                ItemRef(kind="message", id=pk, reason="librarian")
                for pk in messages.values_list("id", flat=True)
            ),
        ],
        "source": f"turn:{turn.pk}",
    }


def shrink_summary(summary: str, *, target_tokens: int, conversation_id: int | None = None) -> str:
    """The "shrink summary" step (SRD 10.4): `summary` within `target_tokens`, keeping
    decisions and artifacts first. Uses the librarian model when available (checked like
    the librarian), else the deterministic layout; never returns more than the target."""
    if estimate(summary) <= target_tokens:
        return summary
    parsed = parse_summary(summary)
    deterministic = compose(parsed, target_tokens)
    model = _librarian_provider()
    if model is not None and target_tokens >= 50:
        spec, provider = model
        kept = parse_summary(deterministic)
        try:
            with call_context(site="librarian", conversation_id=conversation_id):
                text = _ask(
                    spec,
                    provider,
                    system=SHRINK_SYSTEM,
                    prompt=f"Token budget: {target_tokens}.\nSummary:\n{summary}",
                    max_tokens=target_tokens,
                    conversation_id=conversation_id,
                )
            if estimate(text) <= target_tokens and not missing_entities(
                text, artifacts=kept.artifacts, decisions=kept.decisions
            ):
                return text
        except Exception as error:
            logger.warning("shrink-summary model call failed: %s", error)
    if estimate(deterministic) <= target_tokens:
        return deterministic
    return deterministic[: max(0, target_tokens * 4 - 1)]
