"""The cost of a turn in billed input tokens (`manage.py lcm_bench --only cost`, issue 20).

Deterministic and offline: turns run through the real turn engine with the offline
provider (a 200,000-token window, like the Anthropic models'), compaction jobs run inline
as the scheduler asks for them, and every request is rebuilt as the Anthropic adapter
would send it (`AnthropicProvider.build_params`, nothing sent) for a Sonnet-class model
(minimum cacheable prefix 1,024 tokens, 5-minute TTL). Per request the prefix accounting
of providers/caching.py gives the input tokens, the tokens shared with the previous
request, and what Anthropic's cache would serve: read (0.1x), written (1.25x), uncached.

Scenarios:
- a 1,000-turn session with `context_strategy: lcm`, and one with `state`;
- a 1,000-message API conversation under compaction: a client appends each exchange and
  asks `assemble_context` for the cache-friendly order (summaries apart) each time.

Beside each, in the same run: the same requests without cache markers (billed in full),
and the whole history sent directly, marked at its end the way a client that caches
would (until it would overflow the window). Figures are for the steady state: the
requests after the conversation's first compaction.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.test import override_settings

from benchmarks.conversations import bench_user
from benchmarks.harness import BenchContext, BenchRow, benchmark
from providers.anthropic import AnthropicProvider
from providers.base import ProviderRequest
from providers.caching import (
    Analysed,
    CachePlan,
    accounting_between,
    analyse,
    anthropic_min_tokens,
    anthropic_wire_blocks,
    billed_input,
    block_tokens,
)
from providers.config import ModelSpec

WINDOW = 200_000
SONNET = ModelSpec("sonnet", "anthropic", "claude-sonnet-5-5", WINDOW, 8192, None, None)
MINIMUM = anthropic_min_tokens(SONNET.model_id)
# The conversation's compaction budget in the 1,000-turn scenarios: half the input room of
# the window (set by hand, as before issue 35; the turn engine now derives its effective
# budget from the window itself: turns.context.lcm_room, and the window rows below use the
# default budget).
INPUT_LIMIT = WINDOW - 4000 - 1500
CONVERSATION_BUDGET = INPUT_LIMIT // 2


def _configure(window: int) -> None:
    global WINDOW, SONNET, INPUT_LIMIT, CONVERSATION_BUDGET
    WINDOW = window
    SONNET = ModelSpec("sonnet", "anthropic", "claude-sonnet-5-5", window, 8192, None, None)
    INPUT_LIMIT = window - 4000 - 1500
    CONVERSATION_BUDGET = INPUT_LIMIT // 2


def API_BUDGET() -> int:  # noqa: N802 - follows the window
    """The API client's conversation budget: a quarter of the turn engine's, so that its
    shorter messages meet compaction several times in 1,000 messages."""
    return max(4000, CONVERSATION_BUDGET // 4)


SYSTEM_PROMPT = "You are the engineering assistant of the billing team. " + " ".join(
    f"House rule {i}: cite the file, the function and the ticket for every claim; "
    "never guess a figure."
    for i in range(60)
)


@dataclass
class Ledger:
    """Per-request accounting of one scenario."""

    label: str
    direct: bool = False
    total: list[int] = field(default_factory=list)
    shared: list[int] = field(default_factory=list)
    read: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    billed: list[float] = field(default_factory=list)
    plain: list[int] = field(default_factory=list)  # the same request without markers
    steady_from: int | None = None  # index of the first request after the first compaction
    prefix_runs: list[int] = field(default_factory=list)  # requests each summary prefix served
    overflow_at: int | None = None
    previous: Analysed | None = None
    previous_prefix: tuple | None = None

    def add(self, marked: dict, prefix_key: tuple = ()) -> None:
        """One request as sent with markers. Without markers nothing is cached, so the same
        request costs its whole input (cache_control is not counted in the tokens)."""
        current = analyse(anthropic_wire_blocks(marked))
        account = accounting_between(self.previous, current, minimum=MINIMUM)
        self.total.append(account["total"])
        self.shared.append(account["shared"])
        self.read.append(account["read"])
        self.written.append(account["written"])
        self.billed.append(
            billed_input(
                uncached=account["uncached"], read=account["read"], written=account["written"]
            )
        )
        self.plain.append(account["total"])
        if prefix_key != self.previous_prefix or not self.prefix_runs:
            self.prefix_runs.append(0)
        self.prefix_runs[-1] += 1
        self.previous_prefix = prefix_key
        self.previous = current

    def steady(self, values: list) -> list:
        return values[self.steady_from :] if self.steady_from is not None else []

    def csv_lines(self) -> list[str]:
        return [
            f"{self.label},{i + 1},{self.total[i]},{self.shared[i]},{self.read[i]},"
            f"{self.written[i]},{self.billed[i]:.1f},{self.plain[i]}"
            for i in range(len(self.total))
        ]

    def rows(self) -> list[BenchRow]:
        steady_total = sum(self.steady(self.total))
        n = len(self.steady(self.total))
        if not n:
            return [
                BenchRow(
                    f"cost {self.label}: no compaction happened",
                    float(len(self.total)),
                    "requests",
                    "",
                    "no steady state to measure",
                )
            ]
        read_share = sum(self.steady(self.read)) / steady_total if steady_total else 0.0
        billed = sum(self.steady(self.billed))
        plain = sum(self.steady(self.plain))
        runs = self.prefix_runs[1:-1] or self.prefix_runs
        detail = (
            f"{len(self.total)} requests, steady state from #{self.steady_from + 1} ({n}); "
            f"mean input {steady_total / n:,.0f} tok/request, mean shared prefix "
            f"{sum(self.steady(self.shared)) / n:,.0f}, mean billed {billed / n:,.0f} "
            f"vs {plain / n:,.0f} without markers"
        )
        rows = [
            BenchRow(
                f"cost {self.label}: input served from the cache",
                100 * read_share,
                "%",
                ">= 90",
                detail,
            ),
            BenchRow(
                f"cost {self.label}: billed input, % of the same context without markers",
                100 * billed / plain if plain else 0.0,
                "%",
                "<= 20",
                "read 0.1x, written 1.25x",
            ),
            BenchRow(
                f"cost {self.label}: billed input per request (mean)",
                billed / n,
                "tokens",
                "",
                f"{plain / n:,.0f} without markers",
            ),
        ]
        if not self.direct:
            rows.append(
                BenchRow(
                    f"cost {self.label}: requests a summary prefix survives (mean)",
                    sum(runs) / len(runs),
                    "requests",
                    "",
                    f"{len(self.prefix_runs)} summary prefixes (one per compaction, + 1); "
                    f"runs {self.prefix_runs[:12]}",
                )
            )
        if self.overflow_at is not None:
            rows.append(
                BenchRow(
                    f"cost {self.label}: overflowed the window at request",
                    float(self.overflow_at),
                    "#",
                    "",
                    f"{WINDOW:,}-token window",
                )
            )
        return rows


def _anthropic_body(system_parts, messages, tools, stable_messages, marked=None) -> dict:
    system = "\n\n".join(system_parts)
    request = ProviderRequest(
        model=SONNET,
        system=system,
        messages=messages,
        tools=tools,
        max_output_tokens=1024,
        cache=CachePlan(
            tuple(system_parts), stable_messages, "bench", tuple(marked) if marked else None
        ),
    )
    return AnthropicProvider(SONNET).build_params(request)


def _direct(system: str, history: list[dict], ledger: Ledger) -> None:
    """The whole history sent as it is, the end of the previous exchange marked (the way a
    client that caches its own growing history does)."""
    if ledger.overflow_at is not None:
        return
    marked = _anthropic_body([system], history, [], max(0, len(history) - 1))
    if sum(block_tokens(b) for _, b in anthropic_wire_blocks(marked)) > INPUT_LIMIT:
        ledger.overflow_at = len(ledger.total) + 1
        return
    ledger.add(marked)


def _srd_order_body(context: dict) -> dict:
    """The same context in the SRD's section order (before issue 20): instructions, pinned
    facts and the state (`state`: the state sent; `lcm`: the branch's whole LCM context,
    summaries and history as quoted text) in the system text, then pending turns,
    retrieved memory and the user's message. Marked at the system's end, the only stable
    boundary that order has."""
    from providers.blocks import message, text
    from turns.context import AssembledContext

    ctx = AssembledContext.from_dict(context)
    if ctx.strategy == "lcm":
        lines = [*ctx.summaries]
        lines.extend(f"[{m['role']}] {m.get('rendered_text', '')}" for m in ctx.history)
        state = "Branch context (LCM):\n" + "\n".join(lines)
    else:
        state = "Conversation state:\n" + ctx.state_summary
    head = ctx.system_parts[0]
    system = (
        f'{head}\n\n<memory_artifact kind="state" untrusted="true">\n{state}\n</memory_artifact>'
    )
    memory = ctx.retrieved_text()
    user = [*([text(memory)] if memory else []), *ctx.user["blocks"]]
    # `state`: the turns after the fold go as messages, as in the server's order
    turns = ctx.pending if ctx.strategy == "lcm" else [*ctx.history, *ctx.pending]
    messages = [*turns, message("user", user)]
    return _anthropic_body([system], messages, ctx.tools, len(turns))


def _run_compaction_jobs() -> int:
    from compaction.models import CompactionJob, JobState
    from compaction.services import job_run

    ran = 0
    for job_id in CompactionJob.objects.filter(state=JobState.PENDING).values_list("pk", flat=True):
        job_run(job_id=job_id)
        ran += 1
    return ran


@contextlib.contextmanager
def _offline_window():
    """The offline model with the Anthropic window, conversations with the matching
    compaction budget."""
    saved = {k: os.environ.get(k) for k in ("LCM_MODEL_OFFLINE_CONTEXT_LIMIT", "LCM_CONFIG_FILE")}
    os.environ["LCM_MODEL_OFFLINE_CONTEXT_LIMIT"] = str(WINDOW)
    os.environ.pop("LCM_CONFIG_FILE", None)
    try:
        with override_settings(
            LCM_DEFAULT_TOKEN_BUDGET=CONVERSATION_BUDGET, LCM_LIBRARIAN_MODEL="offline"
        ):
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _session_run(turns: int, strategy: str) -> tuple[Ledger, Ledger, Ledger]:
    from conversations.models import Summary
    from providers.blocks import message
    from turns import runner, services
    from turns.jobs import commit_pending
    from turns.models import Branch, ProviderStep

    engine = Ledger(f"session {turns} turns, {strategy}")
    srd = Ledger(f"session {turns} turns, {strategy}: SRD section order", direct=True)
    direct = Ledger(f"session {turns} turns, {strategy}: whole history sent directly", direct=True)
    session = services.session_create(
        owner=bench_user(),
        title=f"cost {strategy}",
        default_model="offline",
        context_strategy=strategy,
        system_prompt=SYSTEM_PROMPT,
    )
    branch = Branch.objects.get(pk=session.active_branch_id)
    history: list[dict] = []
    for n in range(1, turns + 1):
        text = (
            f"Turn {n}: we decided to keep module src/mod_{n % 37}/part_{n}.py and call "
            f"`handler_{n}()`; the build must stay under {n % 9 + 1} minutes. What next?"
        )
        turn = services.turn_accept(session=session, branch=branch, content=text)
        turn = runner.run_turn(turn_id=turn.pk)
        context = turn.context or {}
        step = ProviderStep.objects.filter(turn=turn).order_by("pk").first()
        sent = step.request_json
        marked = _anthropic_body(
            context["system_parts"],
            sent["messages"],
            sent["tools"],
            context["stable_messages"],
            context.get("marked_parts"),
        )
        engine.add(marked, prefix_key=tuple(context["system_parts"]))
        srd.add(_srd_order_body(context))
        history.append(message("user", text))
        _direct(SYSTEM_PROMPT, history, direct)
        history.append(message("assistant", turn.final_assistant_message["blocks"]))
        commit_pending(branch=branch)
        _run_compaction_jobs()
        if (
            engine.steady_from is None
            and Summary.objects.filter(conversation_id=branch.conversation_id).exists()
        ):
            engine.steady_from = direct.steady_from = srd.steady_from = n
    return engine, srd, direct


def _api_run(messages: int) -> tuple[Ledger, Ledger]:
    from compaction.assembly import assemble_context
    from conversations.inputs import MessageInput
    from conversations.models import Summary
    from conversations.services import conversation_create, messages_append
    from core.ids import new_id
    from providers.blocks import message

    conversation, _ = conversation_create(
        owner=bench_user(),
        session_id=f"cost-api-{new_id()}",
        title="cost api",
        token_budget=API_BUDGET(),
    )
    engine = Ledger(f"API conversation {messages} messages")
    direct = Ledger(
        f"API conversation {messages} messages: whole history sent directly", direct=True
    )
    history: list[dict] = []
    for n in range(1, messages // 2 + 1):
        question = (
            f"Exchange {n}: the ledger export for account {n % 23} failed with code E{n % 7}; "
            f"what does handler_{n}() in src/ledger/export_{n % 11}.py do?"
        )
        answer = (
            f"handler_{n}() reads the account's entries, groups them by month and writes "
            f"export_{n}.csv; code E{n % 7} means the month {n % 12 + 1} was still open. "
            "Close the month first, then run the export again."
        )
        messages_append(
            conversation_id=conversation.pk,
            messages=[MessageInput(role="user", content=question)],
        )
        assembled = assemble_context(
            conversation=conversation,
            fmt="anthropic",
            describe_dropped=False,
            split_summaries=True,
        )
        output = assembled.output
        summaries = output["summaries"]
        parts = [SYSTEM_PROMPT] + (["\n".join(summaries)] if summaries else [])
        sent = [
            message(m["role"], _blocks(m["content"]))
            for m in output["messages"]  # the question is the last one
        ]
        marked = _anthropic_body(parts, sent, [], max(0, len(sent) - 1))
        engine.add(marked, prefix_key=tuple(parts))
        history.append(message("user", question))
        _direct(SYSTEM_PROMPT, history, direct)
        history.append(message("assistant", answer))
        messages_append(
            conversation_id=conversation.pk,
            messages=[MessageInput(role="assistant", content=answer)],
        )
        _run_compaction_jobs()
        if (
            engine.steady_from is None
            and Summary.objects.filter(conversation_id=conversation.pk).exists()
        ):
            engine.steady_from = direct.steady_from = n
    return engine, direct


def _blocks(content) -> list[dict]:
    from providers import blocks as B

    if isinstance(content, str):
        return [B.text(content)]
    out = []
    for block in content:
        if block["type"] == "text":
            out.append(B.text(block["text"]))
        elif block["type"] == "tool_use":
            out.append(B.tool_use(block["id"], block["name"], block.get("input")))
        elif block["type"] == "tool_result":
            out.append(B.tool_result(block["tool_use_id"], block.get("content") or ""))
    return out


@benchmark("cost")
def cost(ctx: BenchContext) -> list[BenchRow]:
    rows: list[BenchRow] = []
    turns = ctx.n(1000)
    if ctx.scale < 1:  # a smaller run keeps its compactions: the window shrinks with it
        _configure(max(24_000, int(200_000 * ctx.scale)))
    ledgers: list[Ledger] = []
    # LCM_BENCH_COST_SCENARIOS (comma-separated lcm,state,api; default all three) runs a
    # subset, so that the scenarios can run as separate processes side by side.
    chosen = os.environ.get("LCM_BENCH_COST_SCENARIOS", "lcm,state,api,windows").split(",")
    with _offline_window():
        for strategy in ("lcm", "state"):
            if strategy in chosen:
                ledgers.extend(_session_run(turns, strategy))
        if "api" in chosen:
            ledgers.extend(_api_run(ctx.n(1000)))
    for ledger in ledgers:
        rows.extend(ledger.rows())
    if "windows" in chosen:
        rows.extend(cost_windows(ctx))
    path = Path(settings.DATA_DIR) / f"bench-cost-{'-'.join(chosen)}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "scenario,request,input_tokens,shared_prefix,cache_read,cache_write,billed,no_markers"
    path.write_text(
        "\n".join([header, *(line for led in ledgers for line in led.csv_lines())]) + "\n"
    )
    ctx.notes.append(f"cost: per-request figures in {path}")
    ctx.notes.append(
        f"cost: Sonnet-class accounting (min cacheable {MINIMUM} tokens, 5m TTL), "
        f"{WINDOW:,}-token window, conversation budget {CONVERSATION_BUDGET:,}"
    )
    return rows


# Model windows through the real wire (issue 35) ----------------------------------------------
# Each scenario: a session with the default settings (conversation budget
# LCM_DEFAULT_TOKEN_BUDGET, default system prompt), the built-in `sonnet` model with its
# `context_limit` set to the window, served by the local fake Messages API through the
# official `anthropic` SDK; the fake records every request and replays Anthropic's cache
# rule on what it received (tests/support/fake_prompt_cache.py: writes at breakpoints,
# reads the longest written prefix at a breakpoint or up to 20 blocks before it).
WINDOWS = (16_000, 32_000, 200_000)
WINDOW_TARGETS = {"lcm": 0.85, "state": 0.6}
DROPIN_WINDOWS = (16_000,)  # the stateless drop-in client (issue 35's acceptance)


def _turn_text(n: int) -> tuple[str, str]:
    """About 450 tokens per turn: a question of ~150 and an answer of ~300."""
    question = f"Turn {n}: " + " ".join(
        f"module src/mod_{n % 37}/part_{k}.py calls handler_{n}_{k}()" for k in range(8)
    )
    answer = f"Answer {n}: " + " ".join(
        f"step {k}: keep handler_{n}_{k}() and test ledger_{k} under {k % 9 + 1} minutes."
        for k in range(16)
    )
    return question, answer


def _steady_read_share(reports: list[dict]) -> tuple[float, int, int]:
    """Over the last two thirds of the requests: the share of input tokens read from the
    cache, the mean input per request and the mean billed input (at the base price, 5m
    writes)."""
    steady = reports[len(reports) // 3 :]
    total = sum(
        r["input_tokens"] + r["cache_creation_input_tokens"] + r["cache_read_input_tokens"]
        for r in steady
    )
    read = sum(r["cache_read_input_tokens"] for r in steady)
    billed = sum(
        billed_input(
            uncached=r["input_tokens"],
            read=r["cache_read_input_tokens"],
            written=r["cache_creation_input_tokens"],
        )
        for r in steady
    )
    count = max(1, len(steady))
    return (read / total if total else 0.0), total // count, round(billed / count)


@contextlib.contextmanager
def _fake_anthropic(window: int):
    from tests.support.fake_messages_api import FakeMessagesAPI

    keys = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "LCM_MODEL_SONNET_CONTEXT_LIMIT")
    saved = {k: os.environ.get(k) for k in (*keys, "LCM_CONFIG_FILE")}
    with FakeMessagesAPI(prompt_cache=True) as api:
        os.environ.update(
            {
                "ANTHROPIC_API_KEY": "sk-ant-bench",
                "ANTHROPIC_BASE_URL": api.base_url,
                "LCM_MODEL_SONNET_CONTEXT_LIMIT": str(window),
            }
        )
        os.environ.pop("LCM_CONFIG_FILE", None)
        try:
            with override_settings(
                LCM_LIBRARIAN_MODEL="offline", LCM_SUMMARY_PROVIDER_MODEL="offline"
            ):
                yield api
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _window_run(window: int, strategy: str, turns: int) -> BenchRow:
    from tests.support.fake_messages_api import anthropic_text_stream
    from turns import runner, services
    from turns.jobs import commit_pending
    from turns.models import Branch

    with _fake_anthropic(window) as api:
        session = services.session_create(
            owner=bench_user(),
            title=f"cost window {window} {strategy}",
            default_model="sonnet",
            context_strategy=strategy,
        )
        branch = Branch.objects.get(pk=session.active_branch_id)
        for n in range(1, turns + 1):
            question, answer = _turn_text(n)
            api.enqueue(anthropic_text_stream(answer))
            turn = services.turn_accept(session=session, branch=branch, content=question)
            runner.run_turn(turn_id=turn.pk)
            commit_pending(branch=branch)
            _run_compaction_jobs()
        reports = list(api.cache_reports)
    share, mean_input, billed = _steady_read_share(reports)
    target = WINDOW_TARGETS[strategy]
    return BenchRow(
        f"cost window {window:,}, {strategy}: input cache-readable in steady state",
        100 * share,
        "%",
        f">= {100 * target:.0f}",
        f"{len(reports)} requests through the turn engine and the anthropic SDK, last "
        f"{len(reports) - len(reports) // 3}: mean input {mean_input:,} tok/request, billed "
        f"{billed:,}; "
        f"{'met' if share >= target else 'MISSED'}",
    )


def _dropin_run(window: int, turns: int) -> BenchRow:
    """A stateless drop-in client: each request carries the whole history, sent to the
    drop-in's Anthropic wire (`POST /anthropic/v1/messages`, in process through Django's
    test client, with an LCM API token), which calls the fake upstream through the SDK."""
    import json

    from django.test import Client

    from core.ids import new_id
    from tests.support.fake_messages_api import message
    from tokens.services import token_issue

    with _fake_anthropic(window) as api, override_settings(ALLOWED_HOSTS=["*"]):
        key = token_issue(user=bench_user(), name=f"cost-dropin-{new_id()}", audited=False).key
        client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
        history: list[dict] = []
        compacted = 0
        for n in range(1, turns + 1):
            question, answer = _turn_text(n)
            api.enqueue(message(answer))
            history.append({"role": "user", "content": question})
            body = {"model": "sonnet", "max_tokens": 1024, "messages": history}
            response = client.post(
                "/anthropic/v1/messages", json.dumps(body), content_type="application/json"
            )
            if response.status_code != 200:
                raise RuntimeError(f"drop-in answered {response.status_code}: {response.content!r}")
            compacted += response.headers.get("x-lcm-compacted") == "true"
            history.append({"role": "assistant", "content": response.json()["content"]})
            _run_compaction_jobs()
        reports = list(api.cache_reports)
    share, mean_input, billed = _steady_read_share(reports)
    target = WINDOW_TARGETS["lcm"]
    return BenchRow(
        f"cost window {window:,}, stateless drop-in client: input cache-readable in steady state",
        100 * share,
        "%",
        f">= {100 * target:.0f}",
        f"{len(reports)} requests through the drop-in (whole history each time, max_tokens "
        f"1024; {compacted} sent compacted), last {len(reports) - len(reports) // 3}: mean "
        f"input {mean_input:,} tok/request, billed {billed:,}; "
        f"{'met' if share >= target else 'MISSED'}",
    )


@benchmark("cost_windows")
def cost_windows(ctx: BenchContext) -> list[BenchRow]:
    """`lcm_bench --only cost_windows` (also part of `--only cost` unless
    LCM_BENCH_COST_SCENARIOS leaves out `windows`): 150 turns of ~450 tokens per window
    and strategy, then a stateless drop-in client at each of DROPIN_WINDOWS (16k)."""
    try:
        import tests.support.fake_messages_api  # noqa: F401
    except ImportError:
        ctx.notes.append("cost windows: tests/support not importable, rows skipped")
        return []
    turns = ctx.n(150)
    windows = [
        int(w) for w in os.environ.get("LCM_BENCH_COST_WINDOWS", "").split(",") if w.strip()
    ] or list(WINDOWS)
    # LCM_BENCH_COST_STRATEGIES (comma-separated lcm,state,dropin; default all) runs a subset.
    runs = os.environ.get("LCM_BENCH_COST_STRATEGIES", "lcm,state,dropin").split(",")
    rows = []
    for window in windows:
        for strategy in ("lcm", "state"):
            if strategy in runs:
                rows.append(_window_run(window, strategy, turns))
    if "dropin" in runs:
        rows.extend(_dropin_run(window, turns) for window in DROPIN_WINDOWS)
    return rows
