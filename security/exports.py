"""Explicit, user-initiated exports (SRD 14.3): plan the archive, audit who took it, and
hand back its bytes as they are built (security/export_zip.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from security.export_zip import ArchivePlan, archive_chunks, archive_plan
from security.hard_delete import NotDeletable
from security.services import audit_record


class NotExportable(NotDeletable):
    code = "not_exportable"


@dataclass
class Export:
    """An audited export, not yet built: iterate `chunks()` once for the zip's bytes;
    `manifest` is complete when the iteration ends."""

    plan: ArchivePlan
    actor: object
    manifest: dict = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"lcm-{self.plan.target[0]}-{self.plan.target[1]}.zip"

    def chunks(self) -> Iterator[bytes]:
        return archive_chunks(self.plan, actor=self.actor, manifest=self.manifest)


@dataclass(frozen=True)
class Target:
    """What an export holds: a conversation, or a turn session with its branches'."""

    kind: str  # conversation | session
    id: str
    conversation_ids: frozenset[int]
    session_ids: frozenset[str]


def conversation_target(conversation) -> Target:
    from turns.models import Branch

    session_ids = sorted(
        set(Branch.objects.filter(conversation=conversation).values_list("session_id", flat=True))
    )
    if session_ids:
        raise NotExportable(
            "this conversation is a branch of a turn session: export the session",
            code="belongs_to_session",
            extra={"session_ids": session_ids},
        )
    return Target("conversation", str(conversation.pk), frozenset({conversation.pk}), frozenset())


def session_target(session) -> Target:
    from turns.models import Branch

    conversation_ids = frozenset(
        Branch.objects.filter(session=session).values_list("conversation_id", flat=True)
    )
    return Target("session", session.pk, conversation_ids, frozenset({session.pk}))


def export_conversation(*, conversation, actor, via: str, request=None) -> Export:
    return export_target(conversation_target(conversation), actor=actor, via=via, request=request)


def export_session(*, session, actor, via: str, request=None) -> Export:
    return export_target(session_target(session), actor=actor, via=via, request=request)


def export_target(target: Target, *, actor, via: str, request=None) -> Export:
    return _export(
        conversation_ids=set(target.conversation_ids),
        session_ids=set(target.session_ids),
        target=(target.kind, target.id),
        actor=actor,
        via=via,
        request=request,
    )


def _export(*, conversation_ids, session_ids, target, actor, via, request) -> Export:
    plan = archive_plan(conversation_ids=conversation_ids, session_ids=session_ids, target=target)
    counts = plan.counts()
    # Audited when the export is taken (before any byte is sent): what it holds, by count.
    audit_record(
        action="export",
        via=via,
        actor=actor,
        request=request,
        target_kind=target[0],
        target_id=target[1],
        details=counts,
    )
    return Export(plan=plan, actor=actor)
