"""Explicit, user-initiated exports (SRD 14.3): build the archive and audit who took it."""

from __future__ import annotations

from security.archive import build_archive
from security.hard_delete import NotDeletable
from security.services import audit_record


class NotExportable(NotDeletable):
    code = "not_exportable"


def export_conversation(*, conversation, actor, via: str, request=None) -> tuple[bytes, dict]:
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
    return _export(
        conversation_ids={conversation.pk},
        session_ids=set(),
        target=("conversation", str(conversation.pk)),
        actor=actor,
        via=via,
        request=request,
    )


def export_session(*, session, actor, via: str, request=None) -> tuple[bytes, dict]:
    from turns.models import Branch

    conversation_ids = set(
        Branch.objects.filter(session=session).values_list("conversation_id", flat=True)
    )
    return _export(
        conversation_ids=conversation_ids,
        session_ids={session.pk},
        target=("session", session.pk),
        actor=actor,
        via=via,
        request=request,
    )


def _export(*, conversation_ids, session_ids, target, actor, via, request):
    data, manifest = build_archive(
        conversation_ids=conversation_ids, session_ids=session_ids, target=target, actor=actor
    )
    audit_record(
        action="export",
        via=via,
        actor=actor,
        request=request,
        target_kind=target[0],
        target_id=target[1],
        details={
            "bytes": len(data),
            "rows": {label: t["rows"] for label, t in manifest["tables"].items()},
            "files": len(manifest["files"]),
            "streams": len(manifest["streams"]),
        },
    )
    return data, manifest
