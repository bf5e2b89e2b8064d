"""The Responses wire's stateful side: the product is the store. An answer given with
`store` on (the API's default) is kept (`remember`); `GET` and `DELETE
/openai/v1/responses/{id}` answer from it; a request naming `previous_response_id` continues
that answer's history (`resolve`: the stored input and output, then the request's input), so
the upstream is always called statelessly and the messages are stored as any request's.
Only the caller's own responses are found: another user's id is a 404."""

from __future__ import annotations

from django.db import transaction

from dropin.errors import DropinError, invalid
from dropin.models import StoredResponse
from dropin.requests import DropinRequest


def _not_found(response_id: str, param: str | None = None) -> DropinError:
    return DropinError(
        404, "not_found", f"no response {response_id!r}", param=param, code="not_found"
    )


def get(*, user, response_id: str) -> StoredResponse:
    found = StoredResponse.objects.filter(pk=response_id, owner=user).first()
    if found is None:
        raise _not_found(response_id)
    return found


def delete(*, user, response_id: str) -> None:
    deleted, _ = StoredResponse.objects.filter(pk=response_id, owner=user).delete()
    if not deleted:
        raise _not_found(response_id)


def resolve(body: dict, *, user) -> dict:
    """The body with `input` continuing `previous_response_id`'s history."""
    previous = body.get("previous_response_id")
    if previous is None:
        return body
    if not isinstance(previous, str) or not previous:
        raise invalid("'previous_response_id' must be a response id", "previous_response_id")
    stored = StoredResponse.objects.filter(pk=previous, owner=user).first()
    if stored is None:
        raise _not_found(previous, "previous_response_id")
    new = body.get("input", [])
    if isinstance(new, str):
        new = [{"role": "user", "content": new}]
    if not isinstance(new, list):
        raise invalid("'input' must be a string or an array of items", "input")
    output = [item for item in stored.body.get("output") or [] if isinstance(item, dict)]
    return {**body, "input": [*stored.input, *output, *new]}


def remember(request: DropinRequest, *, conversation_id: int, owner_id: int, answer: dict):
    body = request.body or {}
    if body.get("store", True) is False or not answer.get("id"):
        return
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if StoredResponse.objects.filter(pk=answer["id"]).exclude(owner_id=owner_id).exists():
        return  # an id another user's answer holds is never taken over
    with transaction.atomic():
        StoredResponse.objects.update_or_create(
            pk=answer["id"],
            defaults={
                "owner_id": owner_id,
                "conversation_id": conversation_id,
                "input": items if isinstance(items, list) else [],
                "body": answer,
            },
        )
