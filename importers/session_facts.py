"""What a coding agent said about its session (agent, version, cwd, git branch, model,
first and last times, why a branch or sub-agent exists), kept on the conversation's
import row where it can be filtered on (`selectors.agent_sessions_for_user`), and copied to
`conversations.ConversationOrigin`, which grep filters on and names in every hit.

Each import refreshes it: a session that went on may have moved to another branch or
model; the last value the agent wrote wins, the other keys of `metadata` are merged.
"""

from __future__ import annotations

from django.utils.dateparse import parse_datetime

from conversations.origins import ORIGIN_FIELDS, origin_record
from importers.models import ImportedConversation

_COLUMNS = {
    "agent": 32,
    "agent_version": 64,
    "cwd": None,
    "git_branch": 255,
    "model": 255,
}


_TIMES = ("started_at", "ended_at")


def _when(value):
    if not isinstance(value, str):
        return None
    try:
        return parse_datetime(value)
    except ValueError:
        return None


def record_session_facts(conversation_id: int, format: str, facts: dict) -> None:
    if not facts:
        return
    row = ImportedConversation.objects.filter(conversation_id=conversation_id).first()
    if row is None or row.format != format:
        return  # a conversation this import did not create: its row is not ours to change
    for name, limit in _COLUMNS.items():
        value = facts.get(name)
        if isinstance(value, str) and value:
            setattr(row, name, value[:limit] if limit else value)
    started, ended = _when(facts.get("started_at")), _when(facts.get("ended_at"))
    if started and (row.started_at is None or started < row.started_at):
        row.started_at = started
    if ended and (row.ended_at is None or ended > row.ended_at):
        row.ended_at = ended
    extra = {k: v for k, v in facts.items() if k not in _COLUMNS and k not in _TIMES}
    row.metadata = {**(row.metadata or {}), **extra}
    row.save()
    # The same facts where search (below this app) filters on them and names them per hit.
    if row.agent:
        origin_record(
            conversation_id=conversation_id,
            values={name: getattr(row, name) for name in ORIGIN_FIELDS},
        )
