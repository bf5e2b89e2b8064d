"""What a coding agent said about its session: its origin (agent, version, cwd, git
branch, model, first and last times) on `conversations.ConversationOrigin`, which grep and
`selectors.agent_sessions_for_user` filter on and every search hit names; the rest (why a
branch or sub-agent exists, the agent's own session record) in the import row's `metadata`.

Each import refreshes it: a session that went on may have moved to another branch or
model; the last value the agent wrote wins, the other keys of `metadata` are merged.
"""

from __future__ import annotations

from django.utils.dateparse import parse_datetime

from conversations.models import ConversationOrigin
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
    origin = ConversationOrigin.objects.filter(conversation_id=conversation_id).first()
    values = {name: getattr(origin, name) for name in ORIGIN_FIELDS} if origin else {}
    for name, limit in _COLUMNS.items():
        value = facts.get(name)
        if isinstance(value, str) and value:
            values[name] = value[:limit] if limit else value
    started, ended = _when(facts.get("started_at")), _when(facts.get("ended_at"))
    if started and (values.get("started_at") is None or started < values["started_at"]):
        values["started_at"] = started
    if ended and (values.get("ended_at") is None or ended > values["ended_at"]):
        values["ended_at"] = ended
    extra = {k: v for k, v in facts.items() if k not in _COLUMNS and k not in _TIMES}
    row.metadata = {**(row.metadata or {}), **extra}
    row.save(update_fields=["metadata", "imported_at"])
    if values.get("agent"):  # where search (below this app) filters on them
        origin_record(conversation_id=conversation_id, values=values)
