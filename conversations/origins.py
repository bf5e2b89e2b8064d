"""Where a conversation comes from (`ConversationOrigin`): recorded by the importers,
read by search, which sits below them.

- `origin_record` upserts what an agent said about its session (one statement, so two
  importers of the same session at once cannot collide on the row).
- `OriginFilter` narrows a search to the conversations of some agents, under a project
  directory (the directory itself or anything below it).
- `origins_for` is the provenance of search hits: per conversation an agent wrote, its
  agent, project, git branch, session id, title and times, in one query.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models.functions import Substr

from conversations.models import ConversationOrigin

ORIGIN_FIELDS = ("agent", "agent_version", "cwd", "git_branch", "model", "started_at", "ended_at")


def origin_record(*, conversation_id: int, values: dict) -> None:
    """Store `values` (a subset of ORIGIN_FIELDS) as the conversation's origin."""
    values = {name: values[name] for name in ORIGIN_FIELDS if name in values}
    if not values:
        return
    ConversationOrigin.objects.bulk_create(
        [ConversationOrigin(conversation_id=conversation_id, **values)],
        update_conflicts=True,
        unique_fields=["conversation"],
        update_fields=list(values),
    )


def project_prefix(path: str) -> str:
    """A project directory as compared: without its trailing separators (the root stays)."""
    stripped = path.rstrip("/\\")
    return stripped or path[:1]


@dataclass(frozen=True)
class OriginFilter:
    """Which conversations a search may read, by where they come from. Empty: all."""

    agents: tuple[str, ...] = ()
    project: str = ""

    def __bool__(self) -> bool:
        return bool(self.agents or self.project)

    def conversation_ids(self, conversations) -> list[int]:
        """The ids among `conversations` (a queryset) that match, in id order."""
        origins = ConversationOrigin.objects.filter(conversation__in=conversations)
        if self.agents:
            origins = origins.filter(agent__in=self.agents)
        if self.project:
            origins = _under(origins, project_prefix(self.project))
        return list(origins.order_by("conversation_id").values_list("conversation_id", flat=True))


def _under(origins, prefix: str):
    """cwd is `prefix` or a directory below it. Compared as exact substrings: LIKE is
    case-insensitive on SQLite, and a path is not."""
    n = len(prefix)
    origins = origins.annotate(cwd_head=Substr("cwd", 1, n), cwd_next=Substr("cwd", n + 1, 1))
    if prefix in ("/", "\\"):  # the root: every path under it
        return origins.filter(cwd_head=prefix)
    return origins.filter(cwd_head=prefix, cwd_next__in=("", "/", "\\"))


def origins_for(conversation_ids: Iterable[int]) -> dict[int, dict]:
    """Per conversation a coding agent wrote: where it comes from (others are absent)."""
    ids = set(conversation_ids)
    if not ids:
        return {}
    rows = ConversationOrigin.objects.filter(conversation_id__in=ids).select_related("conversation")
    return {
        origin.conversation_id: {
            "agent": origin.agent,
            "agent_version": origin.agent_version or None,
            "project": origin.cwd or None,
            "git_branch": origin.git_branch or None,
            "model": origin.model or None,
            "session_id": origin.conversation.session_id,
            "title": origin.conversation.title,
            "started_at": origin.started_at,
            "ended_at": origin.ended_at,
        }
        for origin in rows.only(*ORIGIN_FIELDS, "conversation__session_id", "conversation__title")
    }
