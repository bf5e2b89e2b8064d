"""Handles and fidelity: what a span's handles are, how a summary is measured against them,
and the fidelity row the engine writes with every summary."""

from __future__ import annotations

import pytest

from compaction.engine import compact_conversation
from compaction.models import SummaryFidelity
from compaction.summarizers import SourceItem
from compaction.summarizers.fidelity import measure, short_file_names
from compaction.summarizers.handles import command_kinds, draw_handles, merge_handles
from conversations.models import Summary
from retrieval.selectors import describe_for_user
from tests.compaction.helpers import T0, span
from tests.factories import append_messages


def test_a_span_s_handles_are_drawn_by_kind():
    handles = draw_handles(span())

    assert list(handles["file"]) == ["/repo/src/cache/store.py"]
    assert set(handles["command"]) == {"python -m pytest", "git commit", "npm run"}
    assert "KeyError" in handles["error"]
    assert "CacheStore.evict()" in handles["ident"]
    assert list(handles["url"]) == ["https://docs.python.org/3/library/functools.html"]
    assert set(handles["number"]) == {"300", "5"}  # typed by the user only
    assert any("instead of a timer" in d for d in handles["decision"])
    # a passing tool result is not an error; an id of a tool call is not an identifier
    assert not any("file changed" in e for e in handles["error"])
    assert not any(name.startswith("toolu_") for name in handles.get("ident", {}))


def test_handles_are_deterministic_and_count_recurrence():
    twice = span() + span()
    assert draw_handles(twice) == draw_handles(twice)
    assert draw_handles(twice)["file"]["/repo/src/cache/store.py"] == 2


def test_a_failing_result_without_an_error_name_gives_its_first_line():
    tool = SourceItem(
        ref="msg:1",
        kind="message",
        content="[tool Bash t1]\nerror: pathspec 'logs/x' did not match any file(s)",
        created_at=T0,
        role="tool",
    )
    assert list(draw_handles([tool])["error"]) == [
        "error: pathspec 'logs/x' did not match any file(s)"
    ]


def test_command_kinds_keep_the_subcommand_only_where_there_is_one():
    assert command_kinds("cd /x && FOO=1 git status | grep -v y") == ["git status", "grep"]
    assert command_kinds("mv logs old; rm -rf build") == ["mv", "rm"]
    assert command_kinds("cat <<'EOF' > f.txt\nFeature: a\nEOF") == ["cat"]
    assert command_kinds('git commit -m "a\nb; c"') == ["git commit"]


def test_fidelity_is_the_share_named_per_kind_with_what_was_dropped():
    handles = draw_handles(span())
    text = (
        "Edited store.py; ran python  -m pytest (KeyError 'ttl'), then git commit.\n"
        "Decided: use CacheStore.evict() instead of a timer. Limits: 300 s."
    )
    found = measure(text, handles)

    assert found.kept["file"] == [1, 1]  # the file name alone is unambiguous here
    assert found.kept["command"] == [2, 3]
    assert found.dropped["command"] == ["npm run"]
    assert found.dropped["number"] == ["5"]  # "5" is not inside "300"
    assert found.kept["decision"][0] == 1
    assert 0 < found.score < 1
    assert measure("", handles).score == 0
    assert measure("anything", {}).score is None


def test_a_file_name_shared_by_two_paths_needs_its_folder():
    files = {"/a/src/app.py": 1, "/a/tests/app.py": 1}
    assert short_file_names(files) == {
        "/a/src/app.py": "src/app.py",
        "/a/tests/app.py": "tests/app.py",
    }
    assert measure("changed app.py", {"file": files}).kept["file"] == [0, 2]
    assert measure("changed src/app.py", {"file": files}).kept["file"] == [1, 2]


def test_merged_handles_add_counts_and_keep_recency():
    merged = merge_handles([{"file": {"a.py": 1, "b.py": 2}}, {"file": {"a.py": 3}}])
    assert merged == {"file": {"b.py": 2, "a.py": 4}}
    assert list(merged["file"]) == ["b.py", "a.py"]  # a.py seen last


def test_every_summary_is_written_with_its_fidelity(conversation, small_chunks):
    append_messages(conversation, 200)

    result = compact_conversation(conversation_id=conversation.pk, mode="full")

    assert result.status == "compacted"
    rows = {
        f.summary_id: f for f in SummaryFidelity.objects.filter(summary__conversation=conversation)
    }
    assert set(rows) == set(result.summaries_created)
    for row in rows.values():
        assert row.path == "deterministic"
        assert row.handle_count == sum(len(v) for v in row.handles.values())
        named = sum(k[0] for k in row.kept.values())
        assert row.score == round(named / row.handle_count, 4)
        assert sum(len(v) for v in row.dropped.values()) == row.handle_count - named
    condensed = Summary.objects.filter(conversation=conversation, kind="condensed").first()
    children = condensed.parent_links.values_list("parent_summary_id", flat=True)
    below = merge_handles(rows[c].handles for c in children)
    assert rows[condensed.pk].handles == below  # a condensed summary's handles are its children's
    assert "tests/test_cache.py" in below["file"]
    described = describe_for_user(
        user=conversation.owner, item_id=condensed.pk
    )  # API, lcm describe
    assert described["fidelity"]["score"] == rows[condensed.pk].score
    assert described["fidelity"]["dropped"] == rows[condensed.pk].dropped
    assert "TimeoutError" in below["error"]


def test_the_pass_that_brings_until_under_below_its_target_uses_the_room(
    conversation, small_chunks
):
    append_messages(conversation, 200)

    result = compact_conversation(
        conversation_id=conversation.pk, mode="until_under", target_tokens=800
    )

    assert result.status == "compacted"
    assert result.tokens_after <= 800
    last = Summary.objects.get(pk=result.summaries_created[-1])
    assert last.token_count > small_chunks.LCM_CONDENSED_TARGET_TOKENS  # the room, not 160
    before_last = Summary.objects.filter(pk__in=result.summaries_created[:-1])
    assert all(s.token_count <= 160 * 1.5 for s in before_last)


def test_an_automatic_until_under_keeps_the_level_targets(conversation, small_chunks):
    """The low-water mark's headroom is what keeps the next turns' prefix cacheable: an
    automatic run does not fill it with one large summary (docs/cost.md)."""
    append_messages(conversation, 200)

    result = compact_conversation(
        conversation_id=conversation.pk, mode="until_under", target_tokens=800, reason="threshold"
    )

    assert result.summaries_created
    made = Summary.objects.filter(pk__in=result.summaries_created)
    assert max(s.token_count for s in made) <= small_chunks.LCM_CONDENSED_TARGET_TOKENS


def test_a_condensed_summary_names_the_files_its_children_carried_up():
    from compaction.summarizers import DeterministicSummarizer, SummaryRequest

    children = [
        SourceItem(
            ref=f"sum_{i:016x}",
            kind="summary",
            content=f"The assistant kept working on part {i}.",
            created_at=T0,
            latest_at=T0,
        )
        for i in range(3)
    ]
    carried = {"file": {f"/repo/pkg_{i}/module_{i}.py": 1 for i in range(3)}}
    handles = draw_handles(children, carried=[carried, None, None])

    content = (
        DeterministicSummarizer()
        .summarize(
            SummaryRequest(
                sources=children, depth=2, target_tokens=200, level="normal", handles=handles
            )
        )
        .content
    )

    assert measure(content, handles).kept["file"] == [3, 3]  # none of it was in the text


@pytest.mark.parametrize("target", [16, 40, 120, 400])
def test_with_more_handles_than_room_it_stays_within_the_target_and_ranks(target):
    from compaction.summarizers import DeterministicSummarizer, SummaryRequest
    from core.token_estimate import estimate_tokens

    handles = {
        "file": {f"src/area_{i}/file_{i}.py": 1 for i in range(200)},
        "error": {"KeyError": 1},
        "number": {"4711": 1},
        "command": {"git push": 9},
    }
    content = (
        DeterministicSummarizer()
        .summarize(
            SummaryRequest(
                sources=span(), depth=0, target_tokens=target, level="normal", handles=handles
            )
        )
        .content
    )

    assert 0 < estimate_tokens(content) <= target
    if target >= 120:  # errors and user numbers first, then recurrence
        kept = measure(content, handles).kept
        assert kept["error"] == [1, 1] and kept["number"] == [1, 1] and kept["command"] == [1, 1]
        assert 0 < kept["file"][0] < 200


def test_a_file_left_for_the_list_is_written_in_its_short_form_among_all_the_span_s_files():
    from compaction.summarizers import DeterministicSummarizer, SummaryRequest
    from compaction.summarizers.gate import append_missing
    from core.token_estimate import estimate_tokens

    files = {"/repo/src/app.py": 1, "/repo/tests/app.py": 1}
    said = SourceItem(
        ref="msg:1",
        kind="message",
        content="Please fix src/app.py first.",
        created_at=T0,
        role="user",
    )
    request = SummaryRequest(
        sources=[said], depth=0, target_tokens=200, level="normal", handles={"file": files}
    )
    content = DeterministicSummarizer().summarize(request).content
    appended = append_missing("Fixed src/app.py.", {"file": files}, 200, estimate_tokens)

    # "app.py" alone would not say which: the other one is written "tests/app.py"
    assert measure(content, {"file": files}).kept["file"] == [2, 2]
    assert measure(appended, {"file": files}).kept["file"] == [2, 2]


def test_handles_rank_errors_and_numbers_then_what_the_work_touched_then_identifiers():
    from compaction.summarizers.handle_lines import ranked

    handles = {
        "ident": {"parse_config": 9},
        "decision": {"We'll use Postgres instead of SQLite.": 5},
        "file": {"src/app.py": 1},
        "command": {"git push": 2},
        "number": {"300": 1},
    }
    kinds = [kind for kind, _ in ranked(handles)]
    assert kinds == ["number", "command", "file", "ident", "decision"]


def test_a_number_inside_an_id_or_a_word_is_not_named():
    numbers = {"number": {"4": 1, "2": 1, "30": 1}}
    assert measure("see sum_4e1f, v2 and /tmp/30/x", numbers).kept["number"] == [0, 3]
    assert measure("kept 4 (and 2), the 30-minute pulse.", numbers).kept["number"] == [3, 3]
