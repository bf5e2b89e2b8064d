"""Carry out the automatic actions of a repair plan. Call inside the conversation lock.

Every action first checks that its problem still exists (the plan may be old), and says
what it did: `done`, or `skipped` with the reason. Only context items and counters change.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import F, Max

from conversations.models import ContextItem, Conversation, ItemType, Message, Summary
from integrity import plans
from integrity.checks import Scope, context, lineage, messages
from integrity.checks.scope import fetch


@dataclass
class _Item:
    id: int | None  # None: a context item to create (for `message` or `summary`)
    ordinal: int | None
    first_seq: int | None
    message: Message | None = None
    summary: Summary | None = None


def apply_actions(*, conversation_id: int, actions: list[dict]) -> list[dict]:
    scope = Scope(conversation_id)
    outcome: list[dict] = []
    by_kind: dict[str, list[dict]] = {}
    for action in actions:
        by_kind.setdefault(action["action"], []).append(action)
    for action in actions:
        if not action.get("automatic"):
            outcome.append({**_brief(action), "result": "skipped", "reason": "needs a person"})
    # Summaries and messages go back into the context in one ordered merge.
    returning = by_kind.pop(plans.RELINK, []) + by_kind.pop(plans.REINSERT, [])
    if returning:
        by_kind[plans.REINSERT] = returning
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
    dropping = {a["context_item_id"] for a in actions} & dangling
    ContextItem.objects.filter(pk__in=dropping, conversation_id=conversation_id).delete()
    return [
        {**_brief(action), "result": "done"}
        if action["context_item_id"] in dropping
        else {**_brief(action), "result": "skipped", "reason": "no longer dangling"}
        for action in actions
    ]


def _recount_items(conversation_id: int, scope: Scope, actions: list[dict]) -> list[dict]:
    items = ContextItem.objects.filter(
        pk__in=[a["context_item_id"] for a in actions], conversation_id=conversation_id
    ).select_related("message", "summary")
    targets = {item.pk: item.message or item.summary for item in items}
    updates, results = [], []
    for action in actions:
        target = targets.get(action["context_item_id"])
        if target is None:
            results.append({**_brief(action), "result": "skipped", "reason": "item or target gone"})
            continue
        updates.append(ContextItem(pk=action["context_item_id"], token_count=target.token_count))
        results.append({**_brief(action), "result": "done"})
    ContextItem.objects.bulk_update(updates, ["token_count"], batch_size=500)
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
            target = item.message or item.summary
            new_rows.append(
                ContextItem(
                    conversation_id=conversation_id,
                    ordinal=item.ordinal,
                    item_type=ItemType.MESSAGE if item.message else ItemType.SUMMARY,
                    message=item.message,
                    summary=item.summary,
                    token_count=target.token_count,
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


def _messages_below(summary_id: str) -> dict[int, int]:
    """message id -> seq of every message below a summary (one recursive query)."""
    rows = fetch(
        f"""WITH RECURSIVE down(sid) AS (
                SELECT id FROM {lineage.SUMMARY} WHERE id = %s
                UNION
                SELECT sp.parent_summary_id FROM down d
                JOIN {lineage.EDGE_SUM} sp ON sp.summary_id = d.sid
            )
            SELECT m.id, m.seq FROM down d
            JOIN {lineage.EDGE_MSG} sm ON sm.summary_id = d.sid
            JOIN {lineage.MESSAGE} m ON m.id = sm.message_id""",
        [summary_id],
    )
    return {row["id"]: row["seq"] for row in rows}


def _reinsert(conversation_id: int, scope: Scope, actions: list[dict]) -> list[dict]:
    """Put lost summaries (whole: every message below must still be lost) and lost
    messages back, each before the first context item that starts after it."""
    lost = {p["message_id"]: p["seq"] for p in messages.unreachable_messages(scope)}
    results, returning = [], []  # returning: (first seq, _Item)
    placed: set[int] = set()
    for action in (a for a in actions if a["action"] == plans.RELINK):
        summary = Summary.objects.filter(
            pk=action["summary_id"], conversation_id=conversation_id
        ).first()
        below = _messages_below(action["summary_id"]) if summary else {}
        if not below or not set(below) <= set(lost) or set(below) & placed:
            reason = "part of its history is reachable again: its lost messages go back one by one"
            results.append({**_brief(action), "result": "skipped", "reason": reason})
            continue
        placed |= set(below)
        first = min(below.values())
        returning.append((first, _Item(None, None, first, summary=summary)))
        results.append({**_brief(action), "result": "done"})
    singles = [a for a in actions if a["action"] == plans.REINSERT]
    for action in singles:
        done = action["message_id"] in lost
        reason = {} if done else {"reason": "already reachable"}
        results.append({**_brief(action), "result": "done" if done else "skipped", **reason})
    # Single messages, and those of a summary that could not go back whole, one by one.
    wanted = {a["message_id"] for a in singles}
    for action in actions:
        if action["action"] == plans.RELINK:
            wanted |= set(action["message_ids"])
    found = Message.objects.filter(
        conversation_id=conversation_id, pk__in=[m for m in wanted if m in lost and m not in placed]
    ).only("id", "seq", "token_count")
    returning += [(m.seq, _Item(None, None, m.seq, message=m)) for m in found]
    if not returning:
        return results
    ordered = _context_in_order(scope)
    for first, item in sorted(returning, key=lambda pair: pair[0]):
        at = next(
            (i for i, have in enumerate(ordered) if have.first_seq and have.first_seq > first),
            len(ordered),
        )
        ordered.insert(at, item)
    _write_order(conversation_id, ordered)
    return results


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
