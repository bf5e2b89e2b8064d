"""Secrets at ingest: what scanning costs per message (`lcm_bench --only secrets`), and what
it finds in real data (`lcm_eval secrets PATH...`), docs/benchmarks.md "Secrets at ingest".

The cost: the reference workload's messages appended one per call, with the secret guard
and with it bypassed (the same appends, same run, interleaved), beside the scan alone.
The findings: coding-agent session files imported through the real importers under the
`flag` policy (stored verbatim, every finding recorded), and conversation datasets (JSON)
scanned string by string; counted by kind, with a preview of each for spot checks (the
first four characters and the length: the report never prints a whole secret).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.test import override_settings

from benchmarks.capture import detect_format, session_files
from benchmarks.conversations import new_conversation
from benchmarks.harness import BenchContext, BenchRow, benchmark, p50, percentile
from benchmarks.reference_workload import reference_messages
from conversations import secret_guard, services
from conversations.inputs import parse_message
from conversations.models import Message, MessagePart, SecretFinding
from core.secret_scan import find_secrets
from importers.services import import_file

USER = "lcm-eval-secrets"


@contextmanager
def _guard_bypassed():
    """The baseline: the same append with the guard passing every batch through unread."""
    real = secret_guard.guard_messages

    def passthrough(*, conversation_id, messages, policy=None):
        return secret_guard.Guarded(list(messages), [], "")

    secret_guard.guard_messages = passthrough
    try:
        yield
    finally:
        secret_guard.guard_messages = real


def _append_us(conversation_id: int, message) -> float:
    started = time.perf_counter()
    services.messages_append(conversation_id=conversation_id, messages=[message])
    return (time.perf_counter() - started) * 1e6


@benchmark("secrets")
def secrets_cost(ctx: BenchContext) -> list[BenchRow]:
    count = ctx.n(400)
    messages = reference_messages(count, seed=7)
    chars = sorted(len(m.content) for m in messages)
    scan = []
    for message in messages:
        started = time.perf_counter()
        secret_guard.guard_messages(conversation_id=0, messages=[message], policy="mask")
        scan.append((time.perf_counter() - started) * 1e6)
    guarded, bypassed = new_conversation("secrets-on"), new_conversation("secrets-off")
    with_guard, without = [], []
    for message in messages:  # interleaved: both see the same load
        with_guard.append(_append_us(guarded.pk, message))
        with _guard_bypassed():
            without.append(_append_us(bypassed.pk, message))
    stripe = "sk" + "_test_" + "Zq8Xw2Vb6Nm4Lk0Jh9Gf7Ds5Aa3Qp1"
    keyed = parse_message({"role": "user", "content": f"the key is {stripe}, keep it"})
    holding = new_conversation("secrets-key")
    found = [_append_us(holding.pk, keyed) for _ in range(ctx.n(50))]
    big = (
        "ordinary tool output line with a path src/app.py:42 and a sha " + "ab" * 20 + "\n"
    ) * 1600
    big_scan = []
    for _ in range(ctx.n(20)):
        started = time.perf_counter()
        find_secrets(big)
        big_scan.append((time.perf_counter() - started) * 1000)
    detail = f"{count} reference-workload messages (median {chars[len(chars) // 2]:,} chars)"
    share = p50(scan) / p50(without) * 100
    return [
        BenchRow("secret scan alone, one message, p50", p50(scan), "µs", "", f"{detail}; p90 {percentile(scan, 0.9):.0f} µs"),
        BenchRow("ingest one message per call, guard bypassed, p50", p50(without), "µs", "", "baseline, same run"),
        BenchRow("ingest one message per call, with the guard (mask), p50", p50(with_guard), "µs", "", f"scan = {share:.0f}% of the baseline"),
        BenchRow("ingest of a message holding a key (masked + finding), p50", p50(found), "µs", "", "general path: the finding row in the same transaction"),
        BenchRow("secret scan of a 100 KB tool output, p50", p50(big_scan), "ms", "", f"{len(big):,} chars"),
    ]  # fmt: skip


# --- lcm_eval secrets ---------------------------------------------------------------------


@dataclass
class SourceFindings:
    source: str
    messages: int = 0  # messages (or dataset turns) scanned
    with_findings: int = 0
    kinds: Counter = field(default_factory=Counter)
    previews: list[str] = field(default_factory=list)


def _preview(kind: str, value: str, around: str) -> str:
    return f"{kind}: {value[:4]}…({len(value)} chars) in …{around[-40:]!r}"


def _field_value(finding: SecretFinding) -> str:
    """The text a finding points into, read back from the verbatim (flagged) row."""
    message = finding.message
    if finding.location == "content":
        return message.content
    head, _, rest = finding.location.partition("].")
    ordinal = int(head.removeprefix("parts["))
    part = MessagePart.objects.filter(message=message).order_by("ordinal")[ordinal]
    column, _, path = rest.partition(".")
    value = getattr(part, column.split("[")[0])
    for key in filter(None, path.replace("[", ".").replace("]", "").split(".")):
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value if isinstance(value, str) else json.dumps(value)


def _session_findings(path: Path, owner) -> SourceFindings:
    figures = SourceFindings(source=path.name)
    report = import_file(format=detect_format(path), path=path, owner=owner)
    ids = [c.conversation_id for c in report.conversations if c.conversation_id]
    figures.messages = Message.objects.filter(conversation_id__in=ids).count()
    findings = SecretFinding.objects.filter(conversation_id__in=ids).select_related("message")
    figures.with_findings = findings.values("message_id").distinct().count()
    for finding in findings:
        figures.kinds[finding.kind] += 1
        text = _field_value(finding)
        figures.previews.append(
            _preview(finding.kind, text[finding.start : finding.end], text[: finding.start])
        )
    return figures


def _dataset_strings(document) -> list[str]:
    if isinstance(document, str):
        return [document]
    if isinstance(document, dict):
        return [s for v in document.values() for s in _dataset_strings(v)]
    if isinstance(document, list):
        return [s for v in document for s in _dataset_strings(v)]
    return []


def _dataset_findings(path: Path) -> SourceFindings:
    figures = SourceFindings(source=str(path))
    files = [path] if path.is_file() else sorted(path.rglob("*.json"))
    for file in files:
        for text in _dataset_strings(json.loads(file.read_text(encoding="utf-8"))):
            figures.messages += 1
            findings = find_secrets(text)
            figures.with_findings += bool(findings)
            for f in findings:
                figures.kinds[f.kind] += 1
                figures.previews.append(_preview(f.kind, text[f.start : f.end], text[: f.start]))
    return figures


def run(paths: list[Path]) -> list[SourceFindings]:
    """Sessions under the `flag` policy (a scratch database: it writes under USER)."""
    owner, _ = get_user_model().objects.get_or_create(username=USER)
    results = []
    with override_settings(LCM_SECRET_POLICY="flag"):
        for path in paths:
            sessions = [p for p in session_files([path]) if detect_format(p)]
            if sessions:
                results += [_session_findings(p, owner) for p in sessions]
            else:
                results.append(_dataset_findings(path))
    return results


def render(results: list[SourceFindings]) -> str:
    lines = ["source | messages | with a finding | findings by kind", "---|---:|---:|---"]
    for r in results:
        kinds = ", ".join(f"{k} {n}" for k, n in r.kinds.most_common()) or "none"
        lines.append(f"{r.source} | {r.messages:,} | {r.with_findings} | {kinds}")
    lines.append("\nspot check (every finding):")
    lines += [f"  {r.source}: {p}" for r in results for p in r.previews]
    return "\n".join(lines)
