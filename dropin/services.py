"""What a drop-in request does to the store, and what the upstream is sent.

1. `thread_plan` (reads only): the chain hashes of the request's messages, the thread it
   continues (the `X-LCM-Conversation` key's, else the caller's thread whose stored history
   is a prefix of the request), and how many of its messages the request shares.
2. `thread_commit` (writes): a new thread, or the new messages appended to the continued
   one, or, when the request's history differs from the stored one, a fork: a new thread
   whose conversation holds the request's history, linked to its parent at the first
   difference (the parent is never changed, only marked inactive so the key follows the
   fork).
3. `upstream_messages`: the client's messages when they fit the model's input budget, else
   the product's assembled context (compaction's assembler: summaries, then the fresh tail
   verbatim, tool pairing intact) within the budget.
4. `answer_store`: the answer appended after the request's messages (a partial answer is
   stored too, with a `step_finish` part saying it is incomplete).

Every append goes through `conversations.services.messages_append`, with the external id
`dropin:<chain hash>`: a resent message is found, never stored twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from compaction.assembly import assemble_context
from conversations.inputs import MessageInput, PartInput, parse_message
from conversations.models import Conversation, PartType, Role
from conversations.services import conversation_create
from core.api.errors import InvalidInput
from core.ids import new_id
from core.token_estimate import estimate
from dropin import agent_compaction, agent_sessions, checkpoint, memo
from dropin.errors import DropinError
from dropin.models import Thread
from dropin.requests import DropinRequest
from importers import join
from importers.transcripts.blocks import blocks_to_parts, role_for
from providers import blocks as b
from providers.caching import CachePlan, anthropic_min_tokens
from providers.config import ModelSpec, engine_config
from turns.mirror import block_parts

EXTERNAL_PREFIX = "dropin:"
# Without a key, how many of the caller's threads with the same first message are compared
# with a request that continues none of them (the most recently used first).
FORK_CANDIDATES = 5


# identity -----------------------------------------------------------------------------------


def _identity(message: dict) -> list:
    """What makes two messages the same message, whichever wire they came on: the role, the
    visible text (one string: a wire may join text blocks), tool calls, tool results and
    images. Reasoning and provider metadata are not part of it, nor a tool call's input: its
    id names it, and a client may complete the input when it sends the call back (Claude
    Code 2.1 adds `"replace_all": false` to every Edit call it answered)."""
    calls, results, images = [], [], []
    for block in message["blocks"]:
        kind = block.get("type")
        if kind == "tool_use":
            calls.append([block["id"], block["name"]])
        elif kind == "tool_result":
            results.append(
                [block["tool_use_id"], b.tool_result_text(block), bool(block.get("is_error"))]
            )
        elif kind == "image":
            source = block.get("source") or {}
            images.append(
                source.get("url")
                or hashlib.sha256(str(source.get("data", "")).encode()).hexdigest()
            )
    return [message["role"], b.rendered_text(message["blocks"]), calls, results, images]


def _plain_text(blocks: list[dict]) -> str | None:
    """The visible text of a message made of text blocks only (None when it has any other
    block): the fast path of `_identity` for the usual message, with the same result."""
    if len(blocks) == 1:
        block = blocks[0]
        return block.get("text", "") if block.get("type") == "text" else None
    texts = []
    for block in blocks:
        if block.get("type") != "text":
            return None
        texts.append(block.get("text", ""))
    return "".join(texts)


def _identity_data(message: dict) -> str:
    text = _plain_text(message["blocks"])
    if text is not None:
        return f"{message['role']}\0{text}"
    identity = _identity(message)
    if not any(identity[2:]):  # a plain text message: no JSON needed
        return f"{identity[0]}\0{identity[1]}"
    return json.dumps(identity, sort_keys=True, ensure_ascii=False)


def chain(system: str, messages: list[dict]) -> list[str]:
    """[hash of the system prompt, then of each message with everything before it]."""
    head = hashlib.sha256(b"system\0" + system.encode()).hexdigest()
    hashes = [head]
    append, sha256, data = hashes.append, hashlib.sha256, _identity_data
    for message in messages:
        seen = message.get("memo")  # a message parsed before: its step may be known
        after = memo.step(head, seen.name) if seen is not None else None
        if after is None:
            after = sha256((head + data(message)).encode()).hexdigest()
            if seen is not None:
                memo.remember_step(head, seen.name, after)
        head = after
        append(head)
    return hashes


def chain_next(head: str, message: dict) -> str:
    return hashlib.sha256((head + _identity_data(message)).encode()).hexdigest()


# planning (reads) ---------------------------------------------------------------------------


@dataclass
class Plan:
    hashes: list[str]  # len(messages) + 1
    thread: Thread | None  # the thread continued (or forked from)
    shared: int  # messages of the request already stored in `thread`
    key: str  # the conversation key the answer carries
    keyed: bool = False  # named by X-LCM-Conversation (a fork takes the key over)
    forks: bool = False  # the request's history differs from the thread's: a new branch
    # The request continues past the checkpoint the product gave the agent (its history
    # replaced by it): (message, block) where the checkpoint text is; no fork.
    checkpoint_at: tuple[int, int] | None = None
    # The agent compacted its session: its requests now begin with its summary, and the
    # thread goes on from them (dropin/agent_sessions.py), never a fork.
    rebase: bool = False
    compaction: bool = False  # the agent's compaction request (its answer is linked)
    # A compaction request whose history is not the thread's (Claude Code sends an older
    # cut of it, its prompt merged into the last user message): only its prompt and its
    # answer are stored, beside the thread's line, which neither moves nor forks.
    detached: bool = False

    def __post_init__(self) -> None:
        self.forks = (
            self.thread is not None
            and self.shared < self.thread.message_count
            and self.checkpoint_at is None
            and not (self.rebase or self.detached)
        )


def identity_system(request: DropinRequest) -> str:
    """The system prompt as part of a thread's identity: none for an agent session (its
    session id names the thread; Claude Code changes its system prompt on --continue)."""
    return "" if request.session else request.system


SESSION_PREFIX = "session:"


def thread_plan(*, user, request: DropinRequest, key: str | None) -> Plan:
    hashes = chain(identity_system(request), request.messages)
    if key is None and request.session:
        session_plan = _session_plan(user, request, hashes)
        if session_plan is not None:
            return session_plan
        key = SESSION_PREFIX + request.session
    if key is not None:
        thread = Thread.objects.filter(key=key, active=True).first()
        if thread is None:
            return Plan(hashes, None, 0, key, keyed=True)
        if thread.owner_id != user.pk:
            raise DropinError(
                404, "not_found", f"no conversation {key!r}", param="X-LCM-Conversation"
            )
        plan = Plan(hashes, thread, _shared(thread, hashes), key, keyed=True)
        return _past_checkpoint(plan, request) if plan.forks else plan
    # No key: the caller's thread whose stored history is a prefix of the request (the
    # longest such), found by its head hash in one indexed lookup (the whole request, when
    # a request whose upstream call failed is sent again).
    thread = (
        Thread.objects.filter(owner=user, active=True, head_hash__in=hashes)
        .order_by("-message_count")
        .first()
    )
    if thread is not None:
        return Plan(hashes, thread, thread.message_count, thread.key)
    # A history that shares a beginning with one of the caller's recent threads but differs
    # later (an edited or regenerated message) forks that thread at the first difference.
    key = f"lcm-{new_id().lower()}"
    best, shared = None, 0
    if len(hashes) > 2:
        recent = Thread.objects.filter(owner=user, root_hash=hashes[1]).order_by("-updated_at")
        for candidate in recent[:FORK_CANDIDATES]:
            count = _shared(candidate, hashes)
            if count > shared:
                best, shared = candidate, count
    return Plan(hashes, best, shared, key)


def _past_checkpoint(plan: Plan, request: DropinRequest) -> Plan:
    """A keyed thread whose agent replaced its history by the product's checkpoint
    continues (from the checkpoint on), instead of forking a branch that would store the
    agent's kept messages again."""
    at = checkpoint.continued_at(request.messages, plan.thread.conversation_id)
    if at is None:
        return plan
    return Plan(plan.hashes, plan.thread, at[0], plan.key, keyed=True, checkpoint_at=at)


def _session_plan(user, request: DropinRequest, hashes: list[str]) -> Plan | None:
    """An agent session's request (its id in the request) goes to its session's thread. A
    side request of the session (no tools: title or topic generation, quota probes; the
    main loop always sends its tools) goes to a thread of its own beside it, named by its
    first message, never a fork of the session. A session resumed under a new id continues
    the caller's thread whose history its request extends. None: a new session."""
    session_key = SESSION_PREFIX + request.session
    if not request.tools and not agent_sessions.is_compaction_request(request):
        side_key = f"{session_key}:side:{hashes[1][:16]}"
        side = Thread.objects.filter(key=side_key, active=True).first()
        if side is not None and side.owner_id != user.pk:
            raise DropinError(404, "not_found", "no such session", param="metadata.user_id")
        return Plan(hashes, side, _shared(side, hashes) if side else 0, side_key, keyed=True)
    thread = Thread.objects.filter(key=session_key, active=True).first()
    if thread is not None:
        if thread.owner_id != user.pk:
            raise DropinError(404, "not_found", "no such session", param="metadata.user_id")
        shared = _shared(thread, hashes)
        behind = shared < thread.message_count
        rebase = behind and agent_sessions.continues_compacted(request)
        detached = behind and agent_sessions.is_compaction_request(request)
        return Plan(
            hashes, thread, shared, session_key, keyed=True, rebase=rebase, detached=detached
        )
    resumed = (
        Thread.objects.filter(owner=user, active=True, head_hash__in=hashes[1:], system="")
        .exclude(key__contains=":side:")
        .order_by("-message_count")
        .first()
    )
    if resumed is not None:
        return Plan(hashes, resumed, resumed.message_count, resumed.key)
    return None


def _shared(thread: Thread, hashes: list[str]) -> int:
    """How many of the request's messages the thread holds (a prefix: each hash covers
    everything before it)."""
    count = thread.message_count
    if count < len(hashes) and hashes[count] == thread.head_hash:
        return count  # the usual case: the stored history is a prefix of the request
    if hashes[0] != chain(thread.system, [])[0]:
        return 0
    ids = [EXTERNAL_PREFIX + h for h in hashes[1 : count + 1]]
    # Stored, or joined with a captured copy of the session (importers/join.py).
    return len(join.messages_of(thread.conversation_id, ids))


# writing ------------------------------------------------------------------------------------


def message_input(
    message: dict,
    chain_hash: str,
    *,
    extra_parts: tuple = (),
    tool_names: dict[str, str] | None = None,
) -> MessageInput:
    """The message to store. A message that keeps its client's own content (`raw`, the
    Anthropic wire) is stored as the importers store a session file's records: thinking
    verbatim with its signature, tool calls and results as tool parts (the result named by
    its call), system-role messages as system messages, unknown blocks kept whole."""
    if "raw" in message:
        stored = _raw_input(message, chain_hash, extra_parts, tool_names or {})
        if stored is not None:
            return stored
    blocks = message["blocks"]
    only_results = blocks and all(block.get("type") == "tool_result" for block in blocks)
    role = (
        Role.ASSISTANT
        if message["role"] == "assistant"
        else Role.SYSTEM
        if message["role"] == "system"
        else Role.TOOL
        if only_results
        else Role.USER
    )
    parts = list(block_parts(blocks)) + list(extra_parts)
    return MessageInput(
        role=role,
        content=b.rendered_text(blocks),
        parts=tuple(PartInput(p.part_type, i, p.columns) for i, p in enumerate(parts)),
        external_id=EXTERNAL_PREFIX + chain_hash,
    )


def _raw_input(message: dict, chain_hash: str, extra_parts: tuple, tool_names: dict):
    parts: list[dict] = []
    for content in message["raw"]:
        parts.extend(blocks_to_parts(content, tool_names))
    role = "system" if message["role"] == "system" else role_for(message["role"], parts)
    try:
        stored = parse_message({"role": role, "parts": parts, "external_id": "-"})
    except InvalidInput:  # beyond the store's limits: stored from our blocks instead
        return None
    extra = [PartInput(p.part_type, None, p.columns) for p in extra_parts]
    return MessageInput(
        role=stored.role,
        content="",  # stored as the parts' text: tool names, inputs and outputs are searchable
        parts=tuple(
            PartInput(p.part_type, i, p.columns) for i, p in enumerate(list(stored.parts) + extra)
        ),
        external_id=EXTERNAL_PREFIX + chain_hash,
    )


def tool_names_of(messages: list[dict]) -> dict[str, str]:
    """Tool call id -> tool name over a request's messages (a result is stored with it)."""
    return {
        block["id"]: block["name"]
        for message in messages
        for block in message["blocks"]
        if block.get("type") == "tool_use"
    }


def _new_thread(
    *, user, key: str, request: DropinRequest, spec: ModelSpec, parent=None, shared=0
) -> Thread:
    """Call inside a transaction: the conversation and its thread are written together."""
    conversation, _ = conversation_create(
        owner=user,
        session_id=agent_sessions.conversation_session_id(
            key=key, session=request.session, owner_id=user.pk, fork=parent is not None
        ),
        title=(f"drop-in {key}" + (f" (fork at message {shared})" if parent else ""))[:500],
        token_budget=input_budget(spec, request),
    )
    return Thread.objects.create(
        owner=user,
        conversation=conversation,
        key=key,
        system=identity_system(request),
        model=spec.name,
        head_hash=chain(identity_system(request), [])[0],
        message_count=0,
        parent=parent,
        fork_position=shared,
    )


class Raced(Exception):
    """Another request created or forked the same keyed thread first: plan again."""


def thread_commit(*, user, plan: Plan, request: DropinRequest, spec: ModelSpec) -> Thread:
    """The thread that holds the request's messages once this returns; raises `Raced` when
    a concurrent request took the key first (nothing was written)."""
    thread = plan.thread
    if thread is None or plan.forks:
        try:
            with transaction.atomic(durable=True):
                if thread is not None and plan.keyed:
                    # Compare-and-set: only one fork takes the key over.
                    moved = Thread.objects.filter(pk=thread.pk, active=True).update(active=False)
                    if not moved:
                        raise Raced()
                child = _new_thread(
                    user=user,
                    key=plan.key,
                    request=request,
                    spec=spec,
                    parent=thread,
                    shared=plan.shared,
                )
        except IntegrityError:  # the unique active key: another request created it first
            raise Raced() from None
        thread, start = child, 0
    elif plan.detached:
        prompt = agent_sessions.compaction_prompt(request.messages[-1])
        agent_sessions.append(
            conversation_id=thread.conversation_id,
            messages=[message_input(prompt, plan.hashes[-1])],
            joined=agent_sessions.joinable(thread.key),
        )
        return thread
    elif plan.rebase:
        agent_sessions.rebase(thread, plan.hashes[:1])
        _append(thread, request.messages, plan.hashes, 0, after_compaction=True)
        return thread
    else:
        start = plan.shared
    if plan.checkpoint_at is not None:
        _past_checkpoint_append(thread, request, plan)
        return thread
    _append(thread, request.messages, plan.hashes, start)
    return thread


def _past_checkpoint_append(thread: Thread, request: DropinRequest, plan: Plan) -> None:
    """The messages from the checkpoint on appended (the one that carries it from the
    checkpoint's block on: the agent's kept user messages before it are stored already),
    the checkpoint linked as the agent's compaction over what it replaced, and the thread
    following the agent's new history (its chain hashes are the request's)."""
    position, block = plan.checkpoint_at
    messages = request.messages
    first = {**messages[position], "blocks": messages[position]["blocks"][block:]}
    names = tool_names_of(messages)
    inputs = [message_input(first, plan.hashes[position + 1], tool_names=names)]
    inputs += [
        message_input(messages[i], plan.hashes[i + 1], tool_names=names)
        for i in range(position + 1, len(messages))
    ]
    agent_sessions.append(
        conversation_id=thread.conversation_id,
        messages=inputs,
        joined=agent_sessions.joinable(thread.key),
    )
    agent_compaction.checkpoint_link(
        conversation_id=thread.conversation_id,
        at_external_id=inputs[0].external_id,
        text=b.rendered_text(first["blocks"]),
        author="codex",  # the agent whose checkpoint requests the product answers
    )
    # Compare-and-set on the head it replaces: a concurrent request that moved it wins.
    Thread.objects.filter(pk=thread.pk, head_hash=thread.head_hash).update(
        message_count=len(messages),
        head_hash=plan.hashes[-1],
        root_hash=plan.hashes[1],
        forward_cut=None,
        updated_at=timezone.now(),
    )
    thread.message_count, thread.head_hash = len(messages), plan.hashes[-1]


def thread_for(*, user, request: DropinRequest, key: str | None, spec: ModelSpec):
    """(plan, thread): plan, then commit; a request that lost a race to create or fork
    the same key plans again (once more), now continuing the winner's thread."""
    for attempt in range(3):
        plan = thread_plan(user=user, request=request, key=key)
        plan.compaction = agent_sessions.is_compaction_request(request)
        try:
            return plan, thread_commit(user=user, plan=plan, request=request, spec=spec)
        except Raced:
            if attempt == 2:
                raise DropinError(
                    409,
                    "invalid_request",
                    f"conversation {plan.key!r} changed concurrently; retry",
                    param="X-LCM-Conversation",
                ) from None
    raise AssertionError("unreachable")


def _append(
    thread: Thread, messages: list[dict], hashes: list[str], start: int, after_compaction=False
) -> None:
    if start >= len(messages):
        return
    names = tool_names_of(messages)
    inputs = [
        message_input(messages[i], hashes[i + 1], tool_names=names)
        for i in range(start, len(messages))
    ]
    agent_sessions.append(
        conversation_id=thread.conversation_id,
        messages=inputs,
        joined=agent_sessions.joinable(thread.key),
        after_compaction=after_compaction,
    )
    _advance(thread, count=len(messages), head=hashes[len(messages)], root=hashes[1])


def _advance(thread: Thread, *, count: int, head: str, root: str) -> None:
    # Only forward: a concurrent request that already went further wins.
    Thread.objects.filter(pk=thread.pk, message_count__lt=count).update(
        message_count=count, head_hash=head, root_hash=root, updated_at=timezone.now()
    )
    thread.message_count, thread.head_hash = max(thread.message_count, count), head


@dataclass(frozen=True)
class AnswerPlace:
    """Where an answer goes: after the message whose chain hash is `after`, as message
    number `count` of the thread (`root`: the chain hash of its first message)."""

    thread_id: int
    conversation_id: int
    after: str
    count: int
    root: str
    joined: bool = False  # an agent session's thread (dropin/agent_sessions.py)
    compaction: bool = False  # the answer to the agent's compaction request

    @classmethod
    def of(cls, thread: Thread, plan: Plan) -> AnswerPlace:
        return cls(
            thread.pk,
            thread.conversation_id,
            plan.hashes[-1],
            0 if plan.detached else len(plan.hashes),  # 0: the thread's pointer stays
            plan.hashes[1],
            agent_sessions.joinable(thread.key),
            plan.compaction,
        )


def answer_store(
    *, place: AnswerPlace, blocks: list[dict], status: str, raw: list | None = None
) -> None:
    """Append the answer after the request's messages (marked when not completed); `raw`:
    the upstream's own content blocks, when it spoke the client's wire (stored verbatim)."""
    message: dict = {"role": "assistant", "blocks": blocks or [b.text("")]}
    if raw:
        message["raw"] = [raw]
    head = chain_next(place.after, message)
    extra = ()
    if status not in ("completed", "paused"):
        extra = (
            PartInput(
                PartType.STEP_FINISH,
                None,
                {"step_reason": status, "metadata": {"dropin": {"status": status}}},
            ),
        )
    agent_sessions.append(
        conversation_id=place.conversation_id,
        messages=[message_input(message, head, extra_parts=extra)],
        joined=place.joined,
    )
    if place.compaction and status == "completed":
        agent_sessions.compaction_answered(
            conversation_id=place.conversation_id,
            prompt_external_id=EXTERNAL_PREFIX + place.after,
            answer_external_id=EXTERNAL_PREFIX + head,
        )
    Thread.objects.filter(pk=place.thread_id, message_count__lt=place.count).update(
        message_count=place.count, head_hash=head, root_hash=place.root, updated_at=timezone.now()
    )


# the upstream's input -----------------------------------------------------------------------


def max_output(spec: ModelSpec, request: DropinRequest) -> int:
    return min(request.max_tokens or spec.max_output_tokens, spec.max_output_tokens)


def input_budget(spec: ModelSpec, request: DropinRequest) -> int:
    margin = engine_config().budget.safety_margin_tokens
    return max(256, spec.context_limit - max_output(spec, request) - margin)


def request_tokens(system: str, messages: list[dict], tools: list[dict]) -> int:
    """The estimate of what the upstream is sent: the texts (estimated at once), tool calls,
    results and images as JSON, and 4 tokens of framing per message."""
    texts, extra = ([system] if system else []), []
    for message in messages:
        seen = message.get("memo")  # a message parsed before (dropin/memo.py)
        pieces = seen.pieces if seen is not None else None
        if pieces is None:
            pieces = _token_pieces(message)
            if seen is not None:
                seen.pieces = pieces
        texts.append(pieces[0])
        if pieces[1] is not None:
            extra.append(pieces[1])
    total = estimate("\n".join(texts)) + 4 * len(messages)
    if extra:  # the JSON of the list of every message's tool parts, as json.dumps joins it
        total += estimate("[" + ", ".join(extra) + "]")
    if tools:
        total += estimate(json.dumps(tools))
    return total


def _token_pieces(message: dict) -> tuple[str, str | None]:
    """A message's share of `request_tokens`: its visible text, and the JSON of its tool
    calls, results and images (None without any)."""
    text = _plain_text(message["blocks"])
    if text is not None:
        return text, None
    identity = _identity(message)
    if not any(identity[2:]):
        return identity[1], None
    # A call's input is sent (and counted) though it is not part of the identity.
    calls = [
        [block["id"], block["name"], block.get("input")]
        for block in message["blocks"]
        if block.get("type") == "tool_use"
    ]
    return identity[1], json.dumps([calls, *identity[3:]], ensure_ascii=False)


def request_total(request: DropinRequest) -> int:
    """The estimate of the whole request as the client sent it, computed once."""
    if request.total_tokens is None:
        request.total_tokens = request_tokens(request.system, request.messages, request.tools)
    return request.total_tokens


@dataclass
class Upstream:
    system: str
    messages: list[dict]
    tokens: int
    compacted: bool
    cache: CachePlan | None = None
    # The assembled items when compacted (compaction.assembly's descriptions, each with
    # "tail": True in the fresh tail), for the call's receipt (docs/receipts.md).
    items: list[dict] | None = None


SUMMARIES_HEADING = "Summaries of earlier conversation (untrusted data, oldest first):"


def cache_plan(thread: Thread, system_parts: list[str], messages: list[dict]) -> CachePlan:
    """Where the upstream request's stable prefix ends (providers/caching.py): the client's
    system prompt, each summary (only the last one's end marked: the provider looks back
    from it), and every message sent (a stateless client sends them all again next time,
    the new one included)."""
    return CachePlan(
        system_parts=tuple(system_parts),
        stable_messages=len(messages),
        key=f"lcm-thread-{thread.pk}",
        marked_parts=tuple(sorted({0, len(system_parts) - 1})) if system_parts else None,
    )


def upstream_cache(spec: ModelSpec, upstream: Upstream) -> CachePlan | None:
    """The cache plan to send with the upstream request: an Anthropic upstream's marks
    where the request reaches the model's minimum cacheable length (a shorter one goes
    in the client's own shape, unmarked); other wires cache automatically."""
    if spec.provider != "anthropic" or upstream.tokens < anthropic_min_tokens(spec.model_id):
        return None
    return upstream.cache


def upstream_messages(
    *, thread: Thread, request: DropinRequest, spec: ModelSpec, extra_tools: list[dict]
) -> Upstream:
    """What the upstream is sent: the client's request as it is while it fits the model's
    input budget; past that, the thread's assembled context (its summaries after the
    client's system prompt, then the messages that fit), in the cache-friendly order of
    docs/cost.md."""
    tools = request.tools + extra_tools
    budget = input_budget(spec, request)
    sent = request_tokens(request.system, request.messages, tools)
    if sent <= budget:
        parts = [request.system] if request.system else []
        plan = cache_plan(thread, parts, request.messages)
        return Upstream(request.system, request.messages, sent, False, plan)
    # The assembler reads the conversation's id only (the budget is given): no query for it.
    conversation = Conversation(pk=thread.conversation_id)
    room = budget - estimate(json.dumps(tools)) if tools else budget
    assembled = assemble_context(
        conversation=conversation,
        token_budget=max(1, room),
        system=request.system,
        fmt="anthropic",
        describe_dropped=False,
        split_summaries=True,
    )
    messages = [
        {"role": m["role"], "blocks": [_our_block(block) for block in m["content"]]}
        for m in assembled.output["messages"]
    ]
    summaries = list(assembled.output["summaries"])
    parts = [request.system] if request.system else []
    if summaries:
        parts.append(f"{SUMMARIES_HEADING}\n{summaries[0]}")
        parts.extend(summaries[1:])
    system = "\n\n".join(parts)
    plan = cache_plan(thread, parts, messages)
    described = assembled.items
    tail_from = len(described) - assembled.tail_items
    items = [{**d, "tail": n >= tail_from} for n, d in enumerate(described)]
    return Upstream(system, messages, request_tokens(system, messages, tools), True, plan, items)


def _our_block(block: dict) -> dict:
    kind = block.get("type")
    if kind == "tool_use":
        return b.tool_use(block["id"], block["name"], block.get("input") or {})
    if kind == "tool_result":
        content = block.get("content")
        return b.tool_result(
            block["tool_use_id"],
            content if isinstance(content, str) else [_our_block(c) for c in content or []],
            bool(block.get("is_error")),
        )
    return b.text(str(block.get("text", "")))


# the upstream's input, on the client's own wire ---------------------------------------------


@dataclass(frozen=True)
class Replaced:
    """What a forwarded request's messages become past the budget: the summaries of the
    stored conversation's compacted part, then the client's own messages from `first` on
    (their index in the client's `messages`, byte for byte)."""

    summaries: tuple[str, ...]
    first: int
    tokens: int
