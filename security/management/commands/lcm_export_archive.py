"""manage.py lcm_export_archive: write a conversation's or session's full archive to a file."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from conversations.models import Conversation
from core.api.errors import LcmError
from security.exports import export_conversation, export_session


class Command(BaseCommand):
    help = (
        "Export a conversation, or a turn session with its branches' conversations, as a "
        "zip archive: manifest.json, every row as JSON lines (tables/), the transcript "
        "(transcripts/), the large files (files/) and the stream journals and turn event "
        "logs (streams/), all decrypted. The export is audited. Format: docs/security.md."
    )

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--conversation", type=int, help="conversation id")
        target.add_argument("--session", help="turn session id")
        parser.add_argument("--output", required=True, help="path of the zip file to write")
        parser.add_argument("--as-user", help="user name recorded as the exporter in the audit log")

    def handle(self, *args, conversation, session, output, as_user, **options):
        from turns.models import Session

        actor = None
        if as_user:
            actor = get_user_model().objects.filter(username=as_user).first()
            if actor is None:
                raise CommandError(f"no user {as_user!r}")
        path = Path(output)
        if path.exists():
            raise CommandError(f"{path} exists; choose a new file")
        try:
            if conversation is not None:
                row = Conversation.objects.filter(pk=conversation).first()
                if row is None:
                    raise CommandError(f"conversation {conversation} not found")
                export = export_conversation(conversation=row, actor=actor, via="command")
            else:
                row = Session.objects.filter(pk=session).first()
                if row is None:
                    raise CommandError(f"session {session} not found")
                export = export_session(session=row, actor=actor, via="command")
        except LcmError as error:
            raise CommandError(error.message) from None
        size = 0
        with path.open("xb") as handle:
            for chunk in export.chunks():
                handle.write(chunk)
                size += len(chunk)
        manifest = export.manifest
        rows = sum(t["rows"] for t in manifest["tables"].values())
        self.stdout.write(
            f"wrote {path}: {rows} rows, {len(manifest['files'])} files, "
            f"{len(manifest['streams'])} stream files, {size} bytes"
        )
