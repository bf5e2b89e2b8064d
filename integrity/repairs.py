"""Carry out the automatic actions of a repair plan. Call inside the conversation lock.

Every action first checks that its problem still exists (the plan may be old), and says
what it did: `done`, or `skipped` with the reason. Only context items and counters change.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F, Max

from conversations.models import ContextItem, Conversation, ItemType, Message
from integrity import plans
from integrity.checks import Scope, context, lineage, messages
from integrity.checks.scope import fetch


@dataclass
class _Item:
    id: int | None  # None: a context item to create
    ordinal: int | None
    first_seq: int | None
    message: Message | None = None


def apply_actions(*, conversation_id: int, actions: list[dict]) -> list[dict]:
    scope = Scope(conversation_id)
    outcome: list[dict] = []
    by_kind: dict[str, list[dict]] = {}
    for action in actions:
        by_kind.setdefault(action["action"], []).append(action)
    for action in actions:
        if not action.get("automatic"):
            outcome.append({**_brief(action), "result": "skipped", "reason": "needs a person"})
    for kind in plans.AUTOMATIC:
        if kind in by_kind:
            outcome += _HANDLERS[kind](conversation_id, scope, by_kind[kind])
    return outcome


def _brief(action: dict) -> dict:
    return {k: v for k, v in action.items() if k not in ("description", "problem")}


def _drop(conversation_id: int, scope: Scope, actions: list[dict]) -> list[dict]:
    dangling = {p["context_item_id"] for p in context.missing_targets(scope)}
    dangling |= {
        int(p["row_id"])
        for p in lineage.cross_conversation(scope)
        if p["reference"].startswith("context_item") and p["conversation_id"] == conversation_id
    }
    results = []
    for action in actions:
        item_id = action["context_item_id"]
        if item_id in dangling:
            ContextItem.objects.filter(pk=item_id, conversation_id=conversation_id).delete()
            results.append({**_brief(action), "result": "done"})
        else:
            results.append({**_brief(action), "result": "skipped", "reason": "no longer dangling"})
    return results


def _recount_items(conversation_id: int, scope: Scope, actions: list[dict]) -> list[dict]:
    results = []
    for action in actions:
        item = (
            ContextItem.objects.filter(
                pk=action["context_item_id"], conversation_id=conversation_id
            )
            .select_related("message", "summary")
            .first()
        )
        target = item and (item.message or item.summary)
        if target is None:
            results.append({**_brief(action), "result": "skipped", "reason": "item or target gone"})
            continue
        ContextItem.objects.filter(pk=item.pk).update(token_count=target.token_count)
        results.append({**_brief(action), "result": "done"})
    return results


def _context_in_order(scope: Scope) -> list[_Item]:
    ctes, params = context.first_seq_sql(scope)
    rows = fetch(
        f"WITH RECURSIVE {ctes} SELECT context_item_id, ordinal, first_seq FROM item_first "
        "ORDER BY ordinal, context_item_id",
        params,
    )
    return [_Item(r["context_item_id"], r["ordinal"], r["first_seq"]) for r in rows]


def _write_order(conversation_id: int, ordered: list[_Item]) -> None:
    """Keep the longest prefix already numbered in order; number the rest after it.

    Items that move go to negative ordinals first, so no step meets the unique
    (conversation, ordinal) constraint halfway.
    """
    keep, last = 0, None
    for item in ordered:
        if item.id is None or (last is not None and item.ordinal <= last):
            break
        keep, last = keep + 1, item.ordinal
    tail = ordered[keep:]
    moving = [item for item in tail if item.id is not None]
    ContextItem.objects.filter(pk__in=[i.id for i in moving]).update(ordinal=-F("ordinal") - 1)
    next_ordinal = (last or 0) + 1
    new_rows = []
    for item in tail:
        item.ordinal, next_ordinal = next_ordinal, next_ordinal + 1
        if item.id is None:
            new_rows.append(
                ContextItem(
                    conversation_id=conversation_id,
                    ordinal=item.ordinal,
                    item_type=ItemType.MESSAGE,
                    message=item.message,
                    token_count=item.message.token_count,
                )
            )
    if moving:
        updates = [ContextItem(pk=item.id, ordinal=item.ordinal) for item in moving]
        ContextItem.objects.bulk_update(updates, ["ordinal"], batch_size=500)
    ContextItem.objects.bulk_create(new_rows, batch_size=500)
    top = ContextItem.objects.filter(conversation_id=conversation_id).aggregate(m=Max("ordinal"))
    Conversation.objects.filter(pk=conversation_id, last_context_ordinal__lt=top["m"] or 0).update(
        last_context_ordinal=top["m"] or 0
    )


def _reinsert(conversation_id: int, scope: Scope, actions: list[dict]) -> list[dict]:
    still = {p["message_id"] for p in messages.unreachable_messages(scope)}
    wanted = [a for a in actions if a["message_id"] in still]
    results = [
        {**_brief(a), "result": "skipped", "reason": "already reachable"}
        for a in actions
        if a["message_id"] not in still
    ]
    if not wanted:
        return results
    found = Message.objects.filter(
        conversation_id=conversation_id, pk__in=[a["message_id"] for a in wanted]
    ).only("id", "seq", "token_count")
    ordered = _context_in_order(scope)
    for message in sorted(found, key=lambda m: m.seq):
        # Before the first item that starts after this message; at the end if none does.
        at = next(
            (
                i
                for i, item in enumerate(ordered)
                if item.first_seq and item.first_seq > message.seq
            ),
            len(ordered),
        )
        ordered.insert(at, _Item(None, None, message.seq, message))
    _write_order(conversation_id, ordered)
    return results + [{**_brief(a), "result": "done"} for a in wanted]


def _resequence(conversation_id: int, scope: Scope, actions: list[dict]) -> list[dict]:
    ordered = _context_in_order(scope)
    # Items that cover nothing known keep their place after the item before them.
    keys, current = [], 0
    for index, item in enumerate(ordered):
        current = item.first_seq if item.first_seq is not None else current
        keys.append((current, index))
    resorted = [ordered[index] for _, index in sorted(keys)]
    _write_order(conversation_id, resorted)
    return [{**_brief(a), "result": "done"} for a in actions[:1]] + [
        {**_brief(a), "result": "skipped", "reason": "done by the first resequence"}
        for a in actions[1:]
    ]


def _recount_counters(conversation_id: int, scope: Scope, actions: list[dict]) -> list[dict]:
    top_seq = Message.objects.filter(conversation_id=conversation_id).aggregate(m=Max("seq"))["m"]
    top_ordinal = ContextItem.objects.filter(conversation_id=conversation_id).aggregate(
        m=Max("ordinal")
    )["m"]
    conversation = Conversation.objects.get(pk=conversation_id)
    Conversation.objects.filter(pk=conversation_id).update(
        last_seq=top_seq or 0,
        last_context_ordinal=max(conversation.last_context_ordinal, top_ordinal or 0),
    )
    return [{**_brief(a), "result": "done"} for a in actions]


_HANDLERS = {
    plans.DROP: _drop,
    plans.RECOUNT_ITEM: _recount_items,
    plans.REINSERT: _reinsert,
    plans.RESEQUENCE: _resequence,
    plans.RECOUNT_COUNTERS: _recount_counters,
}
