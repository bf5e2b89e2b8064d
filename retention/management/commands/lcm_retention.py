"""manage.py lcm_retention status|plan|apply|restore|schedule (docs/retention.md)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from archive.models import Segment, SegmentState
from conversations.models import Conversation
from core.progress import progress
from retention import services

SCHEDULE_NAME = "lcm-retention"


class Command(BaseCommand):
    help = (
        "Retention: `status` (archived messages, segments, sizes, compressed memory), `plan` "
        "(what the policies would archive), `apply` (archive it, then compress the memory of "
        "archived content as the policy says; --delete also runs the deletion policy), "
        "`restore` (bring a conversation's archived content back, and its memory's full-text "
        "rows and float32 vectors), `schedule` (the periodic "
        "django-q2 job), `mark-missing` (record a lost segment, audited). --dry-run shows the plan without writing; --json prints JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "action", choices=["status", "plan", "apply", "restore", "schedule", "mark-missing"]
        )
        parser.add_argument("--conversation", type=int, action="append", default=None,
                            help="Only this conversation id (repeatable).")  # fmt: skip
        parser.add_argument("--dry-run", action="store_true", help="Plan only; write nothing.")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
        parser.add_argument("--codec", choices=["zstd", "gzip"], default=None,
                            help="Compression of new segments (default LCM_ARCHIVE_CODEC).")  # fmt: skip
        parser.add_argument("--max-segments", type=int, default=None,
                            help="Stop after this many segments (apply).")  # fmt: skip
        parser.add_argument("--delete", action="store_true",
                            help="apply: also hard-delete conversations past the policy's "
                            "delete_after_days (audited).")  # fmt: skip
        parser.add_argument("--vacuum", action="store_true",
                            help="apply: on SQLite, rewrite the file whole after the run "
                            "(VACUUM; done by itself when the run archived a tenth of the "
                            "file); PostgreSQL: no effect (docs/retention.md).")  # fmt: skip
        parser.add_argument("--seq-from", type=int, default=1, help="restore: first seq.")
        parser.add_argument("--seq-to", type=int, default=None, help="restore: last seq.")
        parser.add_argument(
            "--minutes", type=int, default=60, help="schedule: minutes between runs."
        )
        parser.add_argument("--remove", action="store_true", help="schedule: remove it.")
        parser.add_argument("--segment", type=int, default=None,
                            help="mark-missing: the segment id (after no replica could restore "
                            "it; audited).")  # fmt: skip
        parser.add_argument("--confirm", type=int, default=None,
                            help="mark-missing: the segment id again.")  # fmt: skip

    def _conversations(self, options):
        ids = options["conversation"]
        if ids is None:
            return None
        found = list(Conversation.objects.filter(pk__in=ids))
        missing = sorted(set(ids) - {c.pk for c in found})
        if missing:
            raise CommandError(f"no conversation {', '.join(map(str, missing))}")
        return found

    def _out(self, options, data: dict, text: str) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str) if options["json"] else text)

    def handle(self, *args, **options):
        action = options["action"]
        conversations = self._conversations(options)
        if action == "status":
            data = services.retention_status(conversations=conversations)
            text = "\n".join(f"{k}: {v}" for k, v in data.items())
            return self._out(options, data, text)
        if action == "schedule":
            return self._schedule(options)
        if action == "mark-missing":
            return self._mark_missing(options)
        if action == "restore":
            return self._restore(options, conversations)
        ranges = services.retention_plan(conversations=conversations)
        planned = {
            "ranges": [r.as_dict() for r in ranges],
            "messages": sum(r.messages for r in ranges),
            "tokens": sum(r.tokens for r in ranges),
        }
        if action == "plan" or options["dry_run"]:
            text = "\n".join(
                f"conversation {r.conversation_id}: seq {r.seq_from}-{r.seq_to} "
                f"({r.messages} messages, {r.tokens} tokens)"
                for r in ranges
            )
            text += f"\n{len(ranges)} ranges, {planned['messages']} messages would be archived"
            return self._out(options, {"dry_run": True, **planned}, text.strip())
        return self._apply(options, conversations, ranges, planned)

    def _apply(self, options, conversations, ranges, planned):
        with progress(
            total=planned["messages"], desc="Archiving", silent=options["json"], stream=self.stderr
        ) as bar:
            result = services.retention_apply(
                ranges=ranges,
                codec=options["codec"],
                max_segments=options["max_segments"],
                on_range=lambda r: bar.advance(r.messages),
            )
        # catch up the memory of conversations archived before (a policy changed since, or
        # a run that stopped between the archive and the memory step)
        caught_up = services.retention_memory_apply(conversations=conversations).as_dict()
        result.memory = {k: result.memory.get(k, 0) + v for k, v in caught_up.items()}
        result.orphans_removed = services.orphans_remove()
        if options["delete"]:
            result.deleted_conversations = services.retention_delete_due(
                conversations=conversations, via="lcm_retention"
            )
        services.retention_space_reclaim(result=result, vacuum=options["vacuum"])
        data = result.as_dict()
        space = result.database
        how = f" ({space['action']})" if space["action"] != "none" else ""
        text = (
            f"archived {result.messages} messages into {result.segments} segments "
            f"({result.raw_bytes} bytes -> {result.stored_bytes} stored); "
            f"{result.conflicts} ranges changed meanwhile and were skipped; "
            f"memory of archived content: {result.memory.get('vectors_compressed', 0)} vectors "
            f"compressed, {result.memory.get('fulltext_dropped', 0)} full-text rows dropped, "
            f"{result.memory.get('fulltext_restored', 0)} put back, "
            f"{result.memory.get('text_archived', 0)} units' text moved to the archive "
            f"({result.memory.get('text_kept', 0)} kept: not given back exactly), "
            f"{result.memory.get('text_restored', 0)} put back; "
            f"{result.orphans_removed} orphan objects removed; "
            f"{len(result.deleted_conversations)} conversations deleted; "
            f"database {space['before_bytes']:,} -> {space['after_bytes']:,} bytes{how}"
        )
        return self._out(options, data, text)

    def _restore(self, options, conversations):
        if not conversations:
            raise CommandError("restore needs --conversation")
        active = Segment.objects.filter(
            conversation__in=conversations, state=SegmentState.ACTIVE
        ).count()
        if options["dry_run"]:
            return self._out(options, {"dry_run": True, "segments": active},
                             f"{active} segments would be restored")  # fmt: skip
        restored = 0
        with progress(total=len(conversations), desc="Restoring", silent=options["json"],
                      stream=self.stderr) as bar:  # fmt: skip
            for conversation in conversations:
                restored += services.retention_restore(
                    conversation=conversation,
                    seq_from=options["seq_from"],
                    seq_to=options["seq_to"],
                )
                bar.advance()
        return self._out(options, {"restored_messages": restored},
                         f"restored {restored} messages")  # fmt: skip

    def _mark_missing(self, options):
        from archive.services import segment_mark_missing

        segment = Segment.objects.filter(pk=options["segment"]).first()
        if segment is None:
            raise CommandError(f"no segment {options['segment']}")
        if options["confirm"] != segment.pk:
            raise CommandError(f"the content of {segment.message_count} messages is lost for "
                               f"good: repeat the id with --confirm {segment.pk}")  # fmt: skip
        marked = segment_mark_missing(segment=segment, via="lcm_retention")
        return self._out(options, {"segment": segment.pk, "marked_missing": marked},
                         f"segment {segment.pk} marked missing" if marked
                         else f"segment {segment.pk} was not active")  # fmt: skip

    def _schedule(self, options):
        from django_q.models import Schedule

        if options["remove"]:
            deleted, _ = Schedule.objects.filter(name=SCHEDULE_NAME).delete()
            return self._out(options, {"removed": bool(deleted)},
                             "Removed the retention schedule." if deleted else "No schedule.")  # fmt: skip
        if options["minutes"] < 1:
            raise CommandError("--minutes must be at least 1")
        Schedule.objects.update_or_create(
            name=SCHEDULE_NAME,
            defaults={
                "func": "retention.tasks.retention_job",
                "schedule_type": Schedule.MINUTES,
                "minutes": options["minutes"],
                "repeats": -1,
            },
        )
        return self._out(options, {"scheduled": SCHEDULE_NAME, "minutes": options["minutes"]},
                         f"Scheduled {SCHEDULE_NAME!r} every {options['minutes']} min.")  # fmt: skip
