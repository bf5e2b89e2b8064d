"""manage.py lcm_receipts list|show|replay|diff (docs/receipts.md)."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from receipts import selectors
from receipts.diff import receipt_diff
from receipts.models import Receipt


class Command(BaseCommand):
    help = (
        "Receipts of model calls: `list` (a conversation's calls, oldest first: tokens, cache "
        "reads, cost, latency), `show ID` (every item sent and why, budget, what was left "
        "out, what came back), `replay ID` (the exact request body sent upstream, rebuilt "
        "from the stored items; says when a redaction changed it), `diff ID [--against ID]` "
        "(items added, dropped, summarized, moved; where the cached prefix broke; default "
        "against the conversation's previous call). --json prints JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["list", "show", "replay", "diff"])
        parser.add_argument("receipt", nargs="?", help="show/replay/diff: the receipt id.")
        parser.add_argument("--conversation", type=int, help="list: the conversation id.")
        parser.add_argument("--limit", type=int, default=50, help="list: the newest N calls.")
        parser.add_argument("--against", help="diff: the other receipt (default: previous).")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")

    def handle(self, *args, **options):
        action = options["action"]
        if action == "list":
            return self._list(options)
        receipt = self._receipt(options["receipt"])
        if action == "show":
            return self._print(selectors.receipt_detail(receipt), options, self._show_text)
        if action == "replay":
            replay = selectors.replay(receipt)
            if options["json"]:
                return self._json(
                    {"exact": replay.exact, "note": replay.note, "body": json.loads(replay.body)}
                )
            sys.stdout.buffer.write(replay.body + b"\n")
            sys.stdout.flush()
            self.stderr.write(replay.note)
            return None
        against = (
            self._receipt(options["against"])
            if options["against"]
            else selectors.receipt_previous(receipt)
        )
        if against is None:
            raise CommandError("this is the conversation's first call: name one with --against")
        return self._print(receipt_diff(receipt, against), options, self._diff_text)

    def _receipt(self, receipt_id: str | None) -> Receipt:
        if not receipt_id:
            raise CommandError("name a receipt id")
        receipt = Receipt.objects.filter(pk=receipt_id).first()
        if receipt is None:
            raise CommandError(f"receipt {receipt_id} not found")
        return receipt

    def _list(self, options):
        if options["conversation"] is None:
            raise CommandError("list needs --conversation ID")
        rows = list(
            selectors.receipts_of_conversation(conversation_id=options["conversation"]).reverse()[
                : max(1, options["limit"])
            ]
        )[::-1]
        data = [
            {
                "id": r.id,
                "site": r.site,
                "model": r.model,
                "status": r.status,
                "input_tokens": r.input_tokens,
                "output_tokens": r.output_tokens,
                "cache_read_tokens": r.cache_read_tokens,
                "cost_usd": r.cost_usd,
                "latency_ms": r.latency_ms,
                "items": r.item_count,
            }
            for r in rows
        ]
        if options["json"]:
            return self._json(data)
        for row in data:
            self.stdout.write(
                f"{row['id']}  {row['site']:<9} {row['model']:<24} in={row['input_tokens']} "
                f"out={row['output_tokens']} cache_read={row['cache_read_tokens']} "
                f"cost={row['cost_usd']} ms={row['latency_ms'] and round(row['latency_ms'])} "
                f"items={row['items']}"
            )
        return None

    def _print(self, data: dict, options, text):
        if options["json"]:
            return self._json(data)
        for line in text(data):
            self.stdout.write(line)
        return None

    def _json(self, data) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str))

    @staticmethod
    def _show_text(data: dict) -> list[str]:
        response = data["response"]
        lines = [
            f"receipt {data['id']} · {data['site']} · {data['wire']} · {data['model']} · {data['upstream']}",
            f"sent {data['body_bytes']} bytes, {len(data['items'])} items ({data['item_tokens']} tokens), "
            f"{data['cache_marks']} cache marks; stored in {data['stored_bytes']} bytes",
            f"came back: {response['status']} ({response['stop_reason']}), usage {response['usage']}, "
            f"{response['latency_ms'] and round(response['latency_ms'])} ms, cost {response['cost_usd']}",
        ]
        if data["budget"]:
            lines.append(f"budget: {data['budget']}")
        lines.extend(
            f"  {i['index']:>3} {i['kind']:<8} {str(i['id']):<22} {i['tokens']:>6} tok  {i['why']}"
            + ("" if i["in_body"] else "  (not in the body)")
            + ("" if i["unchanged"] else "  (changed since)")
            for i in data["items"]
        )
        if data["left_out"]:
            lines.append(f"left out: {len(data['left_out'])} items")
        return lines

    @staticmethod
    def _diff_text(data: dict) -> list[str]:
        lines = [f"receipt {data['receipt_id']} against {data['against_id']}"]
        lines += [f"  + {a['kind']} {a['id']}" for a in data["added"]]
        lines += [f"  - {d['kind']} {d['id']}" for d in data["dropped"]]
        for entry in data["summarized"]:
            lines.append(f"  ~ messages {entry['message_ids']} summarized by {entry['summary_id']}")
        lines += [f"  > moved {m['kind']} {m['id']}" for m in data["moved"]]
        cache = data["cache"]
        if cache["changed"]:
            item = cache["item"]
            where = (
                f"item {item['index']} ({item['kind']} {item['id']})"
                if item
                else "after the last item"
            )
            lines.append(
                f"cached prefix changed at byte {cache['byte']}: {where}; {cache['tokens_after']} tokens after it"
            )
        else:
            lines.append("cached prefix unchanged")
        lines.append(f"tokens: {data['tokens']}")
        return lines
