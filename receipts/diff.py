"""What changed between two calls (docs/receipts.md, "Diff"): items added, dropped,
summarized (with the summary that replaced them) and moved; where the cached prefix broke
(the first byte where the two bodies part, and the item standing there) and what that
costs in tokens."""

from __future__ import annotations

from bisect import bisect_left

from receipts.items import read_items
from receipts.models import Receipt
from receipts.selectors import receipt_manifest, replay


def receipt_diff(receipt: Receipt, against: Receipt) -> dict:
    new, old = receipt_manifest(receipt), receipt_manifest(against)
    new_keys = [(i.kind, i.id) for i in new.items]
    old_keys = [(i.kind, i.id) for i in old.items]
    new_set, old_set = set(new_keys), set(old_keys)
    added = [k for k in new_keys if k not in old_set]
    dropped = [k for k in old_keys if k not in new_set]
    summaries = [k for k in added if k[0] == "summary"]
    covers = read_items(summaries)
    summarized, plain_dropped = [], []
    for kind, item_id in dropped:
        replacing = next(
            (
                s
                for s in summaries
                if kind == "message"
                and item_id in ((covers.get(s).about or {}).get("message_ids") or ())
            ),
            None,
        )
        if replacing is None:
            plain_dropped.append({"kind": kind, "id": item_id})
        else:
            summarized.append({"kind": kind, "id": item_id, "summary_id": replacing[1]})
    by_summary: dict[str, list] = {}
    for entry in summarized:
        by_summary.setdefault(entry["summary_id"], []).append(entry["id"])
    common_old = [k for k in old_keys if k in new_set]
    common_new = [k for k in new_keys if k in old_set]
    moved = _moved(common_old, common_new)
    return {
        "receipt_id": receipt.id,
        "against_id": against.id,
        "added": [_ref(k, new) for k in added],
        "dropped": plain_dropped,
        "summarized": [
            {
                "summary_id": sid,
                "message_ids": ids,
                "summary_text": (covers[("summary", sid)].texts or [""])[0],
            }
            for sid, ids in by_summary.items()
        ],
        "moved": [{"kind": k, "id": i} for k, i in moved],
        "cache": _cache_break(receipt, against, new, old),
        "tokens": {
            "before": sum(i.tokens for i in old.items),
            "after": sum(i.tokens for i in new.items),
            "added": sum(i.tokens for i in new.items if (i.kind, i.id) in set(added)),
            "dropped": sum(i.tokens for i in old.items if (i.kind, i.id) in set(dropped)),
        },
    }


def _ref(key, stored) -> dict:
    for n, item in enumerate(stored.items):
        if (item.kind, item.id) == key:
            return {
                "kind": item.kind,
                "id": item.id,
                "index": n,
                "reason": item.reason,
                "tokens": item.tokens,
            }
    return {"kind": key[0], "id": key[1]}


def _moved(old: list, new: list) -> list:
    """Items of both calls that changed their order: those outside the longest run kept
    in the same relative order (a longest increasing subsequence of old positions)."""
    where = {k: n for n, k in enumerate(old)}
    positions = [where[k] for k in new]
    tails: list[int] = []
    tail_index: list[int] = []
    parent = [-1] * len(positions)
    for n, value in enumerate(positions):
        at = bisect_left(tails, value)
        if at == len(tails):
            tails.append(value)
            tail_index.append(n)
        else:
            tails[at] = value
            tail_index[at] = n
        parent[n] = tail_index[at - 1] if at else -1
    keep: set[int] = set()
    n = tail_index[-1] if tail_index else -1
    while n != -1:
        keep.add(n)
        n = parent[n]
    return [k for n, k in enumerate(new) if n not in keep]


def _cache_break(receipt: Receipt, against: Receipt, new, old) -> dict:
    """Where this body first differs from the other one's: everything before that byte
    could be read from the provider's cache, nothing after it."""
    rebuilt = replay(receipt, stored=new)
    body_new, body_old = rebuilt.body, replay(against, stored=old).body
    limit = min(len(body_new), len(body_old))
    first = _common_prefix(body_new, body_old, limit)
    if first == limit and len(body_new) == len(body_old):
        return {
            "changed": False,
            "byte": None,
            "item": None,
            "tokens_after": 0,
            **_usages(receipt, against),
        }
    # The item standing at that byte, or the first one after it.
    item_at = next((item for start, end, item in rebuilt.spans if end > first), None)
    after: set[int] = set()
    if item_at is not None:
        order = [item for _s, _e, item in rebuilt.spans]
        after = set(order[order.index(item_at) :])
    return {
        "changed": True,
        "byte": first,
        "item": None
        if item_at is None
        else _ref((new.items[item_at].kind, new.items[item_at].id), new),
        "tokens_after": sum(i.tokens for n, i in enumerate(new.items) if n in after),
        **_usages(receipt, against),
    }


def _usages(receipt: Receipt, against: Receipt) -> dict:
    return {"usage": _usage(receipt), "previous_usage": _usage(against)}


def _usage(receipt: Receipt) -> dict:
    return {
        "input_tokens": receipt.input_tokens,
        "cache_read_tokens": receipt.cache_read_tokens,
        "cache_write_tokens": receipt.cache_write_tokens,
    }


def _common_prefix(a: bytes, b: bytes, limit: int) -> int:
    """The length of the longest common prefix (binary search over C-speed compares)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low
