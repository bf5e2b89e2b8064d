"""A redaction request, checked: the scope (a conversation, a turn session, all of a
user's data) and the selector (message ids, one message's character span, a literal, a
regex). Bad input is an `InvalidInput` (400, the one error shape) before anything is
written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from conversations.archive_port import hydrate_messages
from conversations.models import Conversation, Message
from core.api.errors import InvalidInput, NotFound
from security.redaction.pattern import regex_problem

REASON = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")
MAX_MESSAGES = 1000
MAX_PATTERN = 10_000
MIN_LITERAL = 4
SELECTORS = ("message_ids", "span", "literal", "regex")


@dataclass
class Scope:
    kind: str  # conversation | session | user
    id: str
    conversation_ids: list[int]
    session_ids: list[str] = field(default_factory=list)


@dataclass
class RedactionRequest:
    scope: Scope
    reason: str
    selector_kind: str  # messages | span | literal | regex
    message_ids: list[int] = field(default_factory=list)
    span: dict | None = None  # {"message_id", "start", "end"}
    literal: str | None = None
    regex: str | None = None
    dry_run: bool = False
    confirm_dry_run: str | None = None  # a finished dry run's id (security.redaction.queue)

    def selector(self) -> dict:
        """What the job row may keep: ids and offsets, never text."""
        if self.selector_kind == "messages":
            return {"message_ids": self.message_ids}
        if self.selector_kind == "span":
            return dict(self.span)
        return {}  # not even its length


def scope_of_conversation(conversation: Conversation) -> Scope:
    return Scope("conversation", str(conversation.pk), [conversation.pk])


def scope_of_session(session) -> Scope:
    from turns.models import Branch

    ids = sorted(
        set(Branch.objects.filter(session=session).values_list("conversation_id", flat=True))
    )
    return Scope("session", str(session.pk), ids, [session.pk])


def scope_of_user(user) -> Scope:
    from turns.models import Session

    ids = sorted(Conversation.objects.filter(owner=user).values_list("pk", flat=True))
    sessions = sorted(Session.objects.filter(owner=user).values_list("pk", flat=True))
    return Scope("user", str(user.pk), ids, sessions)


def _bad(message: str, code: str, **extra) -> InvalidInput:
    return InvalidInput(message, code=code, extra=extra or None)


def _message_ids(value, scope: Scope) -> list[int]:
    if not isinstance(value, list) or not value or len(value) > MAX_MESSAGES:
        raise _bad(f"message_ids: a list of 1 to {MAX_MESSAGES} ids", "invalid_message_ids")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise _bad("message_ids: positive integers only", "invalid_message_ids")
    ids = sorted(set(value))
    found = set(
        Message.objects.filter(pk__in=ids, conversation_id__in=scope.conversation_ids).values_list(
            "pk", flat=True
        )
    )
    missing = [i for i in ids if i not in found]
    if missing:  # as for any id the caller cannot see: 404
        raise NotFound(
            "these messages are not in the scope",
            code="unknown_messages",
            extra={"message_ids": missing},
        )
    return ids


def _span(value, scope: Scope) -> dict:
    if not isinstance(value, dict) or set(value) != {"message_id", "start", "end"}:
        raise _bad("span: {message_id, start, end}", "invalid_span")
    if not all(isinstance(value[k], int) and not isinstance(value[k], bool) for k in value):
        raise _bad("span: integers only", "invalid_span")
    (message_id,) = _message_ids([value["message_id"]], scope)
    message = hydrate_messages(Message.objects.filter(pk=message_id))[0]
    start, end = value["start"], value["end"]
    if not 0 <= start < end <= len(message.content):
        raise _bad(
            f"span: 0 <= start < end <= {len(message.content)} (the content's length)",
            "invalid_span",
        )
    return {"message_id": message_id, "start": start, "end": end}


def _pattern(kind: str, value) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_PATTERN:
        raise _bad(f"{kind}: a string of 1 to {MAX_PATTERN} characters", f"invalid_{kind}")
    if kind == "literal" and len(value) < MIN_LITERAL:
        raise _bad(f"literal: at least {MIN_LITERAL} characters", "invalid_literal")
    if kind == "regex" and (problem := regex_problem(value)):
        raise _bad(problem, "invalid_regex")
    return value


def parse(data, scope: Scope) -> RedactionRequest:
    """The checked request; `data` is the JSON body (or the command's options)."""
    if not isinstance(data, dict):
        raise _bad("a JSON object", "invalid")
    unknown = set(data) - {*SELECTORS, "reason", "dry_run", "confirm_dry_run"}
    if unknown:
        raise _bad(f"unknown fields: {', '.join(sorted(unknown))}", "unknown_fields")
    given = [k for k in SELECTORS if data.get(k) is not None]
    if len(given) != 1:
        raise _bad(f"give exactly one of {', '.join(SELECTORS)}", "selector_required")
    reason = data.get("reason", "secret")
    if not isinstance(reason, str) or not REASON.match(reason):
        raise _bad(
            "reason: 1-40 of a-z 0-9 _ . - (it is written into the marker)", "invalid_reason"
        )
    dry_run = data.get("dry_run", False)
    if not isinstance(dry_run, bool):
        raise _bad("dry_run: true or false", "invalid_dry_run")
    if not scope.conversation_ids:
        raise _bad("the scope holds no conversation", "empty_scope")
    confirm = data.get("confirm_dry_run")
    if confirm is not None and not (isinstance(confirm, str) and 0 < len(confirm) <= 24):
        raise _bad("confirm_dry_run: a dry run's id (red_...)", "invalid_confirm_dry_run")
    request = RedactionRequest(
        scope=scope, reason=reason, selector_kind="", dry_run=dry_run, confirm_dry_run=confirm
    )
    kind = given[0]
    if kind == "message_ids":
        request.selector_kind, request.message_ids = "messages", _message_ids(data[kind], scope)
    elif kind == "span":
        request.selector_kind, request.span = "span", _span(data[kind], scope)
        request.message_ids = [request.span["message_id"]]
    elif kind == "literal":
        request.selector_kind, request.literal = "literal", _pattern("literal", data[kind])
    else:
        request.selector_kind, request.regex = "regex", _pattern("regex", data[kind])
    return request
