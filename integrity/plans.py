"""Turn a scan into repair proposals, per conversation. Nothing here writes.

Every action is non-destructive to canonical history: automatic ones only touch the
active context (which compaction rewrites anyway) and the conversation's counters.
Anything that would need a canonical row changed (lineage, seqs, message or summary
counts, stored files) is a `review` action: a person decides.
"""

from __future__ import annotations

from collections import defaultdict

from integrity.report import ScanResult

REINSERT = "reinsert_context_item"
RELINK = "reinsert_summary"
DROP = "drop_context_item"
RESEQUENCE = "resequence_context"
RECOUNT_ITEM = "recompute_context_item_tokens"
RECOUNT_COUNTERS = "recompute_counters"
REVIEW = "review"
AUTOMATIC = (DROP, RECOUNT_ITEM, RELINK, REINSERT, RESEQUENCE, RECOUNT_COUNTERS)  # apply order

_REVIEW_ADVICE = {
    "summary_without_source": "Lineage is immutable: re-summarize the covered range into a new "
    "summary with proper sources, then point the context at it.",
    "summary_depth_mismatch": "Lineage is immutable: build a replacement summary at the right "
    "depth from the same sources.",
    "lineage_cycle": "Lineage is immutable: replace the summaries on the cycle with a new one "
    "built from their message sources.",
    "lineage_ordinal_disorder": "Edge order is immutable: expansion still reaches every source; "
    "re-summarize if the order matters to readers.",
    "cross_conversation_reference": "An edge into another conversation cannot be rewritten: "
    "re-summarize the range in its own conversation.",
    "message_seq_gap": "Message seqs are immutable: record the gap; restore the missing "
    "message from a backup if there is one.",
    "file_id_missing": "Restore the large_files row from a backup, or accept the dangling id.",
    "file_object_missing": "Restore the object from a backup (the row records its SHA-256).",
    "file_object_corrupt": "Restore the object from a backup (the row records its SHA-256).",
    "file_object_unreferenced": "No row points to this object (an interrupted ingest): delete "
    "it after checking it is not needed.",
    "archived_message_unplaced": "Find the segment that holds the message (lcm_retention "
    "status), restore it from a replica of the archive storage, or record the content as "
    "lost (audited).",
    "archive_segment_missing": "Restore the object from a replica or backup of the archive "
    "storage (the row records its SHA-256); else mark the segment missing (audited): the "
    "content of its messages is lost.",
    "archive_segment_corrupt": "Restore the object from a replica or backup of the archive "
    "storage (the row records its SHA-256 and each message's); else mark it missing (audited).",
    "token_count_mismatch": "Canonical counts are immutable: note the difference; the context "
    "item copies can be recomputed.",
    "part_reader_disorder": "A defect of the code, not of the data: the named reader must "
    "order the parts by ordinal (the stored parts are intact).",
}


def _automatic(check: str, problem: dict) -> dict | None:
    if check == "unreachable_message":
        return {
            "action": REINSERT,
            "message_id": problem["message_id"],
            "seq": problem["seq"],
            "description": f"put message seq {problem['seq']} back into the active context, "
            "in seq order",
        }
    if check == "context_item_missing_target":
        return {
            "action": DROP,
            "context_item_id": problem["context_item_id"],
            "description": f"drop context item at ordinal {problem['ordinal']}: it points at "
            "nothing (any history it hid is re-inserted by the unreachable-message repair)",
        }
    if check == "cross_conversation_reference" and problem["reference"].startswith("context_item"):
        return {
            "action": DROP,
            "context_item_id": int(problem["row_id"]),
            "description": "drop a context item that shows another conversation's "
            f"{problem['reference'].split('.')[1]}",
        }
    if check in ("context_ordinal_duplicate", "context_order_mismatch"):
        return {
            "action": RESEQUENCE,
            "description": "renumber the active context in the seq order of what it covers",
        }
    if check == "conversation_counter_mismatch":
        return {
            "action": RECOUNT_COUNTERS,
            "description": "set last_seq to the largest seq and last_context_ordinal to at "
            "least the largest ordinal",
        }
    if check == "token_count_mismatch" and problem["kind"] == "context_item":
        return {
            "action": RECOUNT_ITEM,
            "context_item_id": int(problem["id"]),
            "description": "copy the token count of the item's message or summary again",
        }
    return None


def _relinks(problems: list[dict]) -> tuple[list[tuple[int, dict]], list[dict]]:
    """Lost messages under a lost summary: put the topmost summary back (one action per
    summary, keeping compaction's work); the rest go back one by one."""
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    loose = []
    for problem in problems:
        if problem.get("covering_summary_id"):
            groups[(problem["conversation_id"], problem["covering_summary_id"])].append(problem)
        else:
            loose.append(problem)
    actions = [
        (
            conversation_id,
            {
                "action": RELINK,
                "summary_id": summary_id,
                "message_ids": [p["message_id"] for p in lost],
                "description": f"put summary {summary_id} (over seqs {lost[0]['seq']}-"
                f"{lost[-1]['seq']}) back into the active context, in seq order",
            },
        )
        for (conversation_id, summary_id), lost in groups.items()
    ]
    return actions, loose


def plan_repairs(result: ScanResult) -> dict[int, list[dict]]:
    """conversation id -> its actions (automatic ones first, in apply order)."""
    actions: dict[int, list[dict]] = defaultdict(list)
    seen: set[tuple] = set()
    for outcome in result.outcomes:
        problems = outcome.problems
        if outcome.name == "unreachable_message":
            relinks, problems = _relinks(problems)
            for conversation_id, action in relinks:
                actions[conversation_id].append(
                    {"check": outcome.name, "automatic": True, **action}
                )
        for problem in problems:
            conversation_id = problem.get("conversation_id")
            if conversation_id is None:
                continue
            action = _automatic(outcome.name, problem)
            if action is None:
                action = {
                    "action": REVIEW,
                    "description": _REVIEW_ADVICE.get(outcome.name, "review by hand"),
                    "problem": problem,
                }
            action = {"check": outcome.name, "automatic": action["action"] != REVIEW, **action}
            key = (conversation_id, *sorted((k, repr(v)) for k, v in action.items()))
            if key in seen:
                continue
            seen.add(key)
            actions[conversation_id].append(action)
    order = {name: index for index, name in enumerate((*AUTOMATIC, REVIEW))}
    return {
        conversation_id: sorted(items, key=lambda a: order[a["action"]])
        for conversation_id, items in actions.items()
    }
