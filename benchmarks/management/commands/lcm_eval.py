"""Evaluate the memory on a public long-conversation benchmark (docs/memory.md), or the
capture of coding-agent sessions (`capture`, docs/capture.md)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmarks import recall_eval


class Command(BaseCommand):
    help = (
        "recall: load a dataset in the LoCoMo layout (REALTALK) or the BEAM layout, ingest "
        "it through the messages service, wait for indexing, ask every question through "
        "grep (hybrid, semantic, full_text) and print evidence recall at 500/1,000/2,000 "
        "tokens by category (LoCoMo's by name), with p50/p95 latency, each beside a same-run "
        "BM25 baseline priced alike (per row: BM25 over the same units; per whole message: "
        "BM25 over single messages); then every system at the same price: per row (what a row returns), per "
        "whole message, and by rank (first 5/10/20 rows), beside BM25 over the same units and "
        "over single messages. --via turn asks them through a turn's retrieval instead (the budget as "
        "the turn's retrieval budget). Writes under a user 'lcm-eval': use a scratch database. "
        "capture: import coding-agent session files or folders (Claude Code, Codex, OpenCode, "
        "Gemini CLI; the format found from each file) and print, per file, how whole the "
        "import is (docs/benchmarks.md, Capture). Writes under 'lcm-eval-capture'. "
        "fidelity: import session files (or take conversation ids) and print, per span (each "
        "agent compaction's, else the whole session) and size, the share of the span's "
        "handles named and of its relation probes held (which file changed how, which error "
        "was fixed by what, what the user asked, what was chosen and why, what is open) by "
        "one deterministic summary, by compaction until under the size, by the newest "
        "records that fit, by the agent's own summary, by a list of the names and by the "
        "uncompacted span; the probes' rules, examples of misses per kind and the pooled "
        "figures; --model adds a model summary through the fidelity gate, served by a local "
        "recording upstream (docs/benchmarks.md, Fidelity). Writes under 'lcm-eval-fidelity'. "
        "secrets: import session files under the flag policy and scan conversation datasets "
        "(JSON), and print the secrets found by kind with a preview of each for spot checks "
        "(docs/benchmarks.md, Secrets at ingest). Writes under 'lcm-eval-secrets'."
    )

    def add_arguments(self, parser):
        parser.add_argument("task", choices=["recall", "capture", "fidelity", "secrets"])
        parser.add_argument(
            "path",
            nargs="+",
            help="A dataset file or folder (see docs/memory.md); capture: "
            "session files or folders; fidelity: session files, folders or conversation ids.",
        )
        parser.add_argument(
            "--size",
            type=int,
            default=None,
            help="fidelity: the size in tokens (and twice it); default the agent's own "
            "summary's size where the span has one, else 2,700.",
        )
        parser.add_argument(
            "--model",
            action="store_true",
            help="fidelity: also summarize each span with a model summarizer (the Anthropic "
            "one) through the engine's fidelity gate, served by a local recording upstream "
            "that composes its answer from the request (benchmarks/recording_upstream.py).",
        )
        parser.add_argument(
            "--repair",
            action="store_true",
            help="fidelity: the repair after an agent's own compaction instead: handles and "
            "relation probes kept by the agent's summary alone (a careless model's stand-in "
            "where the file holds none), by the summary plus the addendum the hooks hand back, "
            "and by the product's own compaction and summary at the same total size, with the "
            "addendum's token cost and the kinds that still miss (docs/benchmarks.md).",
        )
        parser.add_argument(
            "--budget",
            type=int,
            default=None,
            help="fidelity --repair: the addendum's token budget (default "
            "LCM_REPAIR_TOKEN_BUDGET).",
        )
        parser.add_argument(
            "--format", choices=sorted(recall_eval.LOADERS), help="recall: the dataset layout."
        )
        parser.add_argument(
            "--modes",
            default=",".join(recall_eval.MODES),
            help="Comma-separated grep modes to ask (default: hybrid,semantic,full_text).",
        )
        parser.add_argument(
            "--via",
            choices=["grep", "turn", "both"],
            default="grep",
            help=(
                "Ask through grep (POST /api/v1/grep/), through a turn's retrieval "
                "(retrieve_for_turn's code, the budget as the turn's), or both (one ingest)."
            ),
        )
        parser.add_argument(
            "--limit-conversations", type=int, default=None, help="Only the first N."
        )
        parser.add_argument(
            "--limit-questions", type=int, default=None, help="Only the first N per conversation."
        )
        parser.add_argument("--json", default=None, help="Also write the figures to this file.")
        parser.add_argument(
            "--tag",
            default=None,
            help=(
                "Name the ingested conversations with this tag; a later run with the same tag "
                "asks again without ingesting (to compare query-time settings)."
            ),
        )

    def handle(self, *args, **options):
        if options["task"] == "fidelity" and options["repair"]:
            self._repair(options["path"], options["budget"], options["json"])
            return
        if options["task"] == "fidelity":
            self._fidelity(options["path"], options["size"], options["json"], options["model"])
            return
        paths = [Path(p) for p in options["path"]]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:
            raise CommandError(f"{', '.join(missing)} does not exist")
        if options["task"] == "capture":
            self._capture(paths, options["json"])
            return
        if options["task"] == "secrets":
            from benchmarks import secrets

            self.stdout.write(secrets.render(secrets.run(paths)))
            return
        if len(paths) != 1:
            raise CommandError("recall takes one dataset path")
        if not options["format"]:
            raise CommandError("recall needs --format")
        path = paths[0]
        modes = tuple(m for m in options["modes"].split(",") if m)
        unknown = [m for m in modes if m not in recall_eval.MODES]
        if unknown:
            raise CommandError(f"unknown mode(s): {', '.join(unknown)}")
        conversations = recall_eval.LOADERS[options["format"]](path)
        if options["limit_conversations"]:
            conversations = conversations[: options["limit_conversations"]]
        if not conversations:
            raise CommandError(f"no conversation found in {path}")

        def progress(name, scores):
            self.stderr.write(f"{name}: {scores.questions} questions so far")

        via = options["via"]
        # one tag for both paths: the second finds the conversations the first ingested
        tag = options["tag"] or dt.datetime.now(dt.UTC).strftime("%Y%m%d%H%M%S%f")
        figures = {}
        if via in ("grep", "both"):
            scores = recall_eval.run(
                conversations,
                modes=modes,
                limit_questions=options["limit_questions"],
                progress=progress,
                tag=tag,
            )
            self.stdout.write(recall_eval.render(scores, modes))
            self.stdout.write("\n" + recall_eval.render_pricings(scores, modes))
            figures["grep"] = scores.as_dict()
        if via in ("turn", "both"):
            turn = recall_eval.run_via_turn(
                conversations,
                limit_questions=options["limit_questions"],
                progress=progress,
                tag=tag,
            )
            self.stdout.write(("\n\n" if via == "both" else "") + "via a turn's retrieval:")
            self.stdout.write(recall_eval.render_turn(turn))
            figures["turn"] = turn.as_dict()
        if options["json"]:
            # --via grep keeps the file's earlier shape (the grep figures at the top)
            body = figures["grep"] if via == "grep" else figures
            Path(options["json"]).write_text(json.dumps(body, indent=2))

    def _capture(self, paths: list[Path], json_path: str | None) -> None:
        from benchmarks import capture

        rows = capture.run(paths)
        if not rows:
            raise CommandError("no session file found")
        self.stdout.write(capture.HEADER)
        for figures in rows:
            self.stdout.write(figures.row())
        if json_path:
            Path(json_path).write_text(
                json.dumps([vars(f) for f in rows], indent=2, ensure_ascii=False)
            )

    def _fidelity(
        self, given: list[str], size: int | None, json_path: str | None, model: bool
    ) -> None:
        from benchmarks import fidelity
        from benchmarks.recording_upstream import RecordingUpstream
        from compaction.summarizers import AnthropicSummarizer
        from compaction.summarizers.relations import RULES

        missing = [p for p in given if not p.isdigit() and not Path(p).exists()]
        if missing:
            raise CommandError(f"{', '.join(missing)} does not exist")
        upstream = RecordingUpstream() if model else None
        summarizer = None
        if upstream is not None:
            summarizer = AnthropicSummarizer(
                api_key="recording",
                base_url=upstream.url,
                model="recording-upstream",
                timeout=60,
                max_retries=0,
            )
        try:
            evaluation, drawn = fidelity.run(given, size=size, model=summarizer)
        finally:
            if upstream is not None:
                summarizer.close()
                upstream.close()
        if not evaluation.cells:
            raise CommandError("no session file or conversation found")
        self._fidelity_report(fidelity, evaluation, drawn, RULES, upstream)
        if json_path:
            Path(json_path).write_text(
                json.dumps([cell.as_dict() for cell in evaluation.cells], indent=2)
            )

    def _repair(self, given: list[str], budget: int | None, json_path: str | None) -> None:
        from benchmarks import repair_eval

        missing = [p for p in given if not p.isdigit() and not Path(p).exists()]
        if missing:
            raise CommandError(f"{', '.join(missing)} does not exist")
        evaluation = repair_eval.run(given, budget=budget)
        if not evaluation.rows:
            raise CommandError("no session file or conversation found")
        write = self.stdout.write
        write("| file | span | method | tokens | addendum | handles kept | relations held |")
        write("|---|---|---|---:|---:|---:|---:|")
        for row in evaluation.rows:
            method = row.method + (" (stand-in)" if row.stand_in and "agent" in row.method else "")
            write(
                f"| `{row.file}` | {row.span} | {method} | {row.tokens:,} | "
                f"{row.addendum_tokens or '—'} | {_share(row.fidelity.score)} | "
                f"{_share(row.relations.score)} |"
            )
        write(f"\npooled over every span (addendum budget {evaluation.budget:,} tokens):")
        for method in repair_eval.METHODS:
            handles, relations = evaluation.pooled(method)
            write(f"  {method}: handles {_share(handles)}, relation probes {_share(relations)}")
        costs = evaluation.addendum_costs()
        write(
            f"addendum tokens: mean {sum(costs) / len(costs):,.0f}, max {max(costs):,}, "
            f"{sum(c > evaluation.budget for c in costs)} over the budget"
        )
        kinds = evaluation.by_kind("agent + addendum")
        short = {k: v for k, v in kinds.items() if v[1] and v[0] < v[1]}
        write(
            "still missed by agent + addendum, by kind: "
            + (", ".join(f"{k} {v[0]}/{v[1]}" for k, v in short.items()) or "none")
        )
        if json_path:
            Path(json_path).write_text(
                json.dumps([row.as_dict() for row in evaluation.rows], indent=2)
            )

    def _fidelity_report(self, fidelity, evaluation, drawn, rules: str, upstream) -> None:
        write = self.stdout.write
        write(fidelity.HEADER)
        for cell in evaluation.cells:
            write(cell.row())
        write("\nhandles per span: " + ", ".join(f"{k}: {v}" for k, v in drawn.items()))
        probes = {key: len(found) for key, found in evaluation.probes.items()}
        write("relation probes per span: " + ", ".join(f"{k}: {v}" for k, v in probes.items()))
        write("\n" + rules + "\n\npooled relation probes held (every span):")
        for method, rank, held, total in sorted(evaluation.pooled()):
            share = f"{held / total:.3f}" if total else "—"
            write(f"  {method} @ size {rank}: {held}/{total} = {share}")
        for method in ("lcm summary", "agent summary", "model summary"):
            misses = evaluation.misses(method)
            if misses:
                write(f"\nexamples of misses, {method} (first size):")
                for kind, examples in misses.items():
                    write(f"  {kind}: " + " | ".join(examples))
        if upstream is not None:
            paths = ", ".join(f"{path}: {n}" for path, n in evaluation.gate_paths().items())
            write(f"\nthe gate's decisions on the model summaries: {paths}")
            write(f"recording upstream: {len(upstream.requests)} requests answered")
        write(
            f"drawing handles and measuring: {evaluation.cost_per_thousand_ms():.2f} ms "
            "per 1,000 source tokens; the deterministic summaries: "
            f"{evaluation.summary_ms_per_thousand_messages():.0f} ms per 1,000 messages"
        )


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
