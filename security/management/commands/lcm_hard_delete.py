"""manage.py lcm_hard_delete: irreversibly delete a conversation or a turn session."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from conversations.models import Conversation
from core.api.errors import LcmError
from security.hard_delete import hard_delete_conversation, hard_delete_session


class Command(BaseCommand):
    help = (
        "Hard delete (irreversible): remove a conversation, or a turn session with the "
        "conversations of its branches, and everything derived from it: messages, parts, "
        "summaries, lineage, context, files and their stored objects, memory chunks and "
        "vectors, turns, steps, states, journals, event logs and search rows. Writes an "
        "audit record with ids and counts only. --confirm must repeat the id."
    )

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--conversation", type=int, help="conversation id")
        target.add_argument("--session", help="turn session id")
        parser.add_argument("--confirm", required=True, help="the same id again")

    def handle(self, *args, conversation, session, confirm, **options):
        from turns.models import Session

        try:
            if conversation is not None:
                row = Conversation.objects.filter(pk=conversation).first()
                if row is None:
                    raise CommandError(f"conversation {conversation} not found")
                result = hard_delete_conversation(conversation=row, confirm=confirm, via="command")
            else:
                row = Session.objects.filter(pk=session).first()
                if row is None:
                    raise CommandError(f"session {session} not found")
                result = hard_delete_session(session=row, confirm=confirm, via="command")
        except LcmError as error:
            raise CommandError(f"{error.message} {json.dumps(error.extra)}") from None
        self.stdout.write(json.dumps(result.as_dict(), indent=2, sort_keys=True))
