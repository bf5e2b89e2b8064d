"""`manage.py lcm_eval recall` on a small conversation made here (never the shared data)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from benchmarks.recall_eval import (
    Scores,
    Unit,
    _evidence_ids,
    as_messages,
    load_beam,
    load_locomo,
    recall_at,
    recall_by_rank,
    score_rows,
)
from conversations.models import Message

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_caches(settings, tmp_path):
    from memory.vectors.numpy_exact import INDEX, SUMMARY_INDEX

    settings.DATA_DIR = tmp_path
    INDEX.reset()
    SUMMARY_INDEX.reset()


def _locomo(tmp_path):
    lines = [
        ("Ana", "Hey, how was your weekend?"),
        ("Ben", "Great, I went hiking near the glacier lake with my sister."),
        ("Ana", "Nice! I adopted a grey kitten called Pixel on Saturday."),
        ("Ben", "Pixel is a lovely name for a cat."),
        ("Ana", "My new job at the bakery starts on Monday."),
        ("Ben", "Good luck with the bakery job!"),
    ]
    session = [
        {"speaker": s, "clean_text": t, "dia_id": f"D1:{i}", "date_time": f"0{i}.05.2024, 10:00:00"}
        for i, (s, t) in enumerate(lines, start=1)
    ]
    data = {
        "name": {"speaker_1": "Ana", "speaker_2": "Ben"},
        "session_1": session,
        "session_1_date_time": "01.05.2024, 10:00:00",
        "qa": [
            {"question": "What is the name of Ana's kitten?", "evidence": ["D1:3"], "category": 1},
            {"question": "Where did Ben go hiking?", "evidence": ["D1:2"], "category": 2},
            {"question": "Where does Ana work now?", "evidence": ["D1:5;D1:99"], "category": 2},
        ],
    }
    path = tmp_path / "Chat_1_Ana_Ben.json"
    path.write_text(json.dumps(data))
    return path


def test_evidence_ids_split_lists_and_expand_ranges():
    assert _evidence_ids(["D5:12;D5:16", "D12:3-D12:5", "D1:1, D1:2"]) == [
        "D5:12",
        "D5:16",
        "D12:3",
        "D12:4",
        "D12:5",
        "D1:1",
        "D1:2",
    ]


def test_recall_counts_a_message_once_and_skips_what_does_not_fit():
    cap = {1: 30, 2: 500, 3: 10}
    # two passages of message 1 (30 tokens in all): the second costs only what is left
    units = [Unit((1,), 25), Unit((1,), 25), Unit((2,), 500), Unit((3,), 10)]
    assert recall_at(units, {1, 3}, 50, cap) == 1.0  # 25 + 5 + (500 skipped) + 20
    assert recall_at(units, {1, 3}, 49, cap) == 0.5  # 20 for message 3 no longer fits
    assert recall_at(units, {2}, 1000, cap) == 1.0
    assert recall_at([], {2}, 1000, cap) == 0.0


def test_recall_counts_a_window_over_several_messages_once_per_message():
    cap = {4: 10, 5: 10, 6: 12, 7: 40}
    window = Unit((4, 5, 6), 30)  # covers its three messages for its own 30 tokens
    assert recall_at([window], {4, 5, 6}, 30, cap) == 1.0
    assert recall_at([window], {4, 5, 6}, 29, cap) == 0.0
    # a message of the window read again costs nothing more; an unread one its tokens
    units = [window, Unit((5,), 8), Unit((7,), 40)]
    assert recall_at(units, {5, 7}, 70, cap) == 1.0
    assert recall_at(units, {5, 7}, 69, cap) == 0.5
    # a window over a message already read pays only for the others (8 + 12 after 5)
    units = [Unit((5,), 10), window]
    assert recall_at(units, {4, 6}, 42, cap) == 1.0  # 20 (the minimum) + 10 + 12
    assert recall_at(units, {4, 6}, 41, cap) == 0.0


def test_the_three_pricings_charge_a_row_what_it_returns_its_message_or_nothing():
    cap = {1: 300, 2: 30, 3: 25}
    rows = [Unit((1,), 30), Unit((2,), 30), Unit((3,), 25)]  # a 30-token passage of message 1
    evidence = {1, 3}
    assert recall_at(rows, evidence, 100, cap) == 1.0  # per row: 85 tokens read
    whole = as_messages(rows, cap)
    assert [u.tokens for u in whole] == [300, 30, 25]
    assert recall_at(whole, evidence, 100, cap) == 0.5  # message 1 does not fit
    assert recall_by_rank(rows, evidence, 1) == 0.5
    scores = Scores()
    score_rows(scores, "hybrid", "cat", rows, evidence, cap, share=1.0)
    assert scores.mean("hybrid", "all", 500) == 1.0
    assert scores.mean("hybrid:message", "all", 500) == 1.0
    assert scores.mean("hybrid:message", "cat", 1000) == 1.0
    assert scores.mean("hybrid", "cat", "r5") == 1.0


def test_loaders_read_both_layouts(tmp_path):
    conversation = load_locomo(_locomo(tmp_path))[0]
    assert [m.role for m in conversation.messages[:2]] == ["user", "assistant"]
    assert conversation.messages[2].content == (
        "Ana: Nice! I adopted a grey kitten called Pixel on Saturday."
    )
    assert conversation.messages[2].created_at.isoformat() == "2024-05-03T10:00:00+00:00"
    assert [q.evidence for q in conversation.questions] == [["D1:3"], ["D1:2"], ["D1:5"]]
    assert conversation.questions[2].unresolved == 1

    beam = tmp_path / "beam" / "1"
    beam.mkdir(parents=True)
    turns = [
        [
            {
                "role": "user",
                "id": 0,
                "content": "My sprint ends on March 29. ->-> 1,1",
                "time_anchor": "March-15-2024",
            },
            {"role": "assistant", "id": 1, "content": "Noted: March 29. ->-> 1,1"},
        ]
    ]
    (beam / "chat.json").write_text(json.dumps([{"batch_number": 1, "turns": turns}]))
    (beam / "probing_questions.json").write_text(
        json.dumps(
            {
                "abstention": [{"question": "x?"}],
                "information_extraction": [
                    {"question": "When does my sprint end?", "source_chat_ids": [0]}
                ],
                "summarization": [{"question": "Summarise", "conversation_references": ["x"]}],
                "knowledge_update": [
                    {
                        "question": "Now?",
                        "source_chat_ids": {"original_info": [0], "updated_info": [1]},
                    }
                ],
            }
        )
    )
    [chat] = load_beam(tmp_path / "beam")
    assert [m.content for m in chat.messages] == ["My sprint ends on March 29.", "Noted: March 29."]
    assert [(q.category, q.evidence) for q in chat.questions] == [
        ("information_extraction", ["0"]),
        ("knowledge_update", ["0", "1"]),
    ]


def test_lcm_eval_recall_ingests_asks_and_prints_every_budget(tmp_path):
    out = StringIO()
    figures = tmp_path / "figures.json"
    call_command(
        "lcm_eval",
        "recall",
        str(_locomo(tmp_path)),
        "--format",
        "locomo",
        "--json",
        str(figures),
        stdout=out,
        stderr=StringIO(),
    )
    stored = list(Message.objects.order_by("seq").values_list("role", "external_id"))
    assert stored[:2] == [("user", "Chat_1_Ana_Ben:D1:1"), ("assistant", "Chat_1_Ana_Ben:D1:2")]
    assert len(stored) == 6
    data = json.loads(figures.read_text())
    assert data["questions"] == 3
    assert data["evidence_unresolved"] == 1
    systems = {"bm25_single_message", "bm25_units", "hybrid", "semantic", "full_text"}
    assert set(data["recall"]) == systems | {f"{s}:message" for s in systems}
    assert set(data["recall"]["hybrid"]["all"]) >= {"500", "1000", "2000", "r5", "r10", "r20"}
    # Six short messages fit in any budget: everything a question's words touch is read;
    # the third question's evidence is half not findable.
    assert data["recall"]["bm25_single_message"]["all"]["500"] == pytest.approx(
        (1 + 1 + 0.5) / 3, abs=1e-3
    )
    assert data["recall"]["hybrid"]["all"]["2000"] == pytest.approx((1 + 1 + 0.5) / 3, abs=1e-3)
    table = out.getvalue()
    assert "| hybrid | all | 3 |" in table
    # each figure beside a baseline priced alike: per row beside BM25 over the same units,
    # per whole message beside BM25 over single messages; LoCoMo's categories by name
    assert "| row @500 (BM25 units) |" in table and "| message @2000 (BM25 messages) |" in table
    assert "| hybrid | 1 multi-hop | 1 |" in table and "| hybrid | 2 temporal | 2 |" in table
    assert "| all | bm25_units |" in table and "| message @1000 |" in table


def test_lcm_eval_refuses_a_missing_path(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="does not exist"):
        call_command("lcm_eval", "recall", str(tmp_path / "nope"), "--format", "beam")
    assert Message.objects.count() == 0
