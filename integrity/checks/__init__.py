"""Named integrity detectors.

Each check is a pure function: it reads the database (and, for files, the storage) and
returns its problems; it never writes. `integrity.report.scan` runs them all, in the order
below. A problem is a flat dict that always carries `conversation_id`, plus what identifies it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from integrity.checks import archived, context, files, lineage, messages, part_order, tokens
from integrity.checks.scope import Scope


@dataclass(frozen=True)
class Check:
    name: str
    detect: Callable[[Scope], list[dict]]
    description: str


CHECKS: tuple[Check, ...] = (
    Check(
        "unreachable_message",
        messages.unreachable_messages,
        "A message that is neither in the active context nor reachable from a summary in it.",
    ),
    Check(
        "summary_without_source",
        lineage.summaries_without_source,
        "A summary with no source message and no source summary.",
    ),
    Check(
        "summary_depth_mismatch",
        lineage.depth_mismatches,
        "A condensed summary whose depth is not one more than a source's, or a summary with "
        "sources of the wrong kind.",
    ),
    Check("lineage_cycle", lineage.cycles, "A summary that is its own ancestor."),
    Check(
        "lineage_ordinal_disorder",
        lineage.ordinal_disorder,
        "Edge ordinals of a summary that disagree with the chronological order of its sources.",
    ),
    Check(
        "cross_conversation_reference",
        lineage.cross_conversation,
        "A lineage edge or context item that points into another conversation.",
    ),
    Check(
        "context_item_missing_target",
        context.missing_targets,
        "A context item whose message or summary does not exist.",
    ),
    Check(
        "context_ordinal_duplicate",
        context.duplicate_ordinals,
        "Two context items of a conversation with the same ordinal.",
    ),
    Check(
        "context_order_mismatch",
        context.order_mismatches,
        "Context items whose ordinal order disagrees with the seq order of what they cover.",
    ),
    Check(
        "message_seq_gap",
        messages.seq_gaps,
        "Message seqs of a conversation that are not 1, 2, 3, ... (a gap or a duplicate).",
    ),
    Check(
        "conversation_counter_mismatch",
        messages.counter_mismatches,
        "A conversation's last_seq or last_context_ordinal behind (or past) its rows.",
    ),
    Check(
        "file_id_missing",
        files.missing_file_ids,
        "A message or summary whose file_ids name a file the conversation does not have.",
    ),
    Check(
        "file_object_missing",
        files.missing_objects,
        "A large file whose stored object is gone.",
    ),
    Check(
        "file_object_corrupt",
        files.corrupt_objects,
        "A stored object whose size or SHA-256 differs from its large_files row.",
    ),
    Check(
        "file_object_unreferenced",
        files.unreferenced_objects,
        "A stored object no large_files row points to (left by an interrupted ingest).",
    ),
    Check(
        "archived_message_unplaced",
        archived.unplaced_messages,
        "An archived message whose segment is not an active segment of its conversation "
        "covering its seq.",
    ),
    Check(
        "archive_segment_missing",
        archived.missing_segments,
        "An active archive segment whose stored object is gone.",
    ),
    Check(
        "archive_segment_corrupt",
        archived.corrupt_segments,
        "An archive segment whose object, or one of its messages, does not match the recorded "
        "SHA-256, or whose messages differ from the rows that point to it.",
    ),
    Check(
        "token_count_mismatch",
        tokens.token_count_mismatches,
        "A stored token count that disagrees with the content it counts.",
    ),
    Check(
        "part_reader_disorder",
        part_order.readers_out_of_order,
        "A code path that reads a message's parts in another order than their ordinals "
        "(run over messages whose rows are stored out of ordinal order).",
    ),
)

__all__ = ["CHECKS", "Check", "Scope"]
