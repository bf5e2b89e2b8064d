"""`lcm_eval recall --via turn`: the questions asked through a turn's retrieval
(memory.turn_retrieval.turn_retrieve), on small conversations made here (never the shared data)."""

from __future__ import annotations

import datetime as dt
import json
from io import StringIO

import pytest
from django.core.management import call_command

from benchmarks.recall_eval import (
    BUDGETS,
    EvalConversation,
    EvalMessage,
    EvalQuestion,
    packed_units,
    run_via_turn,
)
from memory.retrieved_items import RetrievedItem
from memory.turn_retrieval import WRAPPER_TOKENS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_caches(settings, tmp_path):
    from memory.vectors.numpy_exact import INDEX, SUMMARY_INDEX

    settings.DATA_DIR = tmp_path
    INDEX.reset()
    SUMMARY_INDEX.reset()


START = dt.datetime(2024, 5, 1, 9, 0, tzinfo=dt.UTC)


def _conversation() -> EvalConversation:
    """Sixty short lines about plants, two of them the evidence for one question."""
    texts = [f"Ana: the fern on shelf {i} needs water twice a week." for i in range(60)]
    texts[12] = "Ana: I finally adopted a grey kitten and called her Pixel."
    texts[47] = "Ben: Pixel the kitten knocked the fern off the shelf today."
    messages = [
        EvalMessage(
            key=f"D1:{i + 1}",
            role="user" if text.startswith("Ana") else "assistant",
            content=text,
            created_at=START + dt.timedelta(minutes=i),
        )
        for i, text in enumerate(texts)
    ]
    questions = [
        EvalQuestion(text="What did Ana call her kitten?", category="1", evidence=["D1:13"]),
        EvalQuestion(
            text="What happened to the kitten Pixel?",
            category="2",
            evidence=["D1:13", "D1:48"],
            unresolved=2,  # two more ids that name no message: at most half findable
        ),
    ]
    return EvalConversation("plants", messages, questions)


def test_packed_items_cover_their_messages_and_cost_their_wrapper():
    item = RetrievedItem(
        chunk_id="c" * 26,
        text="three messages",
        summary="",
        chunk_type="other",
        provenance={"seq_start": 4, "seq_end": 6},
        similarity=0.9,
        score=1.0,
        rank=1,
        tokens=120,
    )
    [unit] = packed_units([item])
    assert unit.seqs == (4, 5, 6)
    assert unit.tokens == 120 + WRAPPER_TOKENS


def test_the_turn_path_asks_every_question_at_every_budget(settings):
    settings.LCM_RETRIEVAL_SIMILARITY_THRESHOLD = 0.0
    scores = run_via_turn([_conversation()], tag="t1")
    data = scores.as_dict()
    assert data["questions"] == 2
    assert data["messages"] == 60
    assert data["evidence_unresolved"] == 2
    baselines = {"bm25_single_message", "bm25_units"}
    assert set(data["recall"]) == {"turn"} | baselines | {f"{b}:message" for b in baselines}
    turn = data["recall"]["turn"]
    # the kitten's name is found at every budget; the second question's evidence is half
    # not findable, so 0.5 is the most it can score
    for budget in BUDGETS:
        assert turn["1"][str(budget)] == 1.0
        assert turn["2"][str(budget)] == 0.5
    # a turn never injects more than its budget, and a larger budget lets in more
    injected = data["injected_tokens_mean"]
    assert 0 < injected["500"] <= 500
    assert injected["500"] < injected["1000"] <= 1000
    assert injected["1000"] < injected["2000"] <= 2000
    assert len(scores.latency_ms["turn"]) == 2 * len(BUDGETS)


def test_lcm_eval_via_both_ingests_once_and_prints_both_tables(tmp_path, settings):
    from conversations.models import Conversation, Message

    settings.LCM_RETRIEVAL_SIMILARITY_THRESHOLD = 0.0
    lines = [
        ("Ana", "Hey, how was your weekend?"),
        ("Ben", "Great, I went hiking near the glacier lake with my sister."),
        ("Ana", "Nice! I adopted a grey kitten called Pixel on Saturday."),
    ]
    data = {
        "name": {"speaker_1": "Ana", "speaker_2": "Ben"},
        "session_1": [
            {"speaker": s, "clean_text": t, "dia_id": f"D1:{i}"}
            for i, (s, t) in enumerate(lines, start=1)
        ],
        "session_1_date_time": "01.05.2024, 10:00:00",
        "qa": [{"question": "Where did Ben go hiking?", "evidence": ["D1:2"], "category": 2}],
    }
    path = tmp_path / "Chat_1_Ana_Ben.json"
    path.write_text(json.dumps(data))
    figures = tmp_path / "figures.json"
    out = StringIO()
    call_command(
        "lcm_eval",
        "recall",
        str(path),
        "--format",
        "locomo",
        "--via",
        "both",
        "--modes",
        "hybrid",
        "--json",
        str(figures),
        stdout=out,
        stderr=StringIO(),
    )
    assert Conversation.objects.count() == 1  # the turn path found the grep path's ingest
    assert Message.objects.count() == 3
    body = json.loads(figures.read_text())
    assert set(body) == {"grep", "turn"}
    assert body["grep"]["recall"]["hybrid"]["all"]["500"] == 1.0
    assert body["turn"]["recall"]["turn"]["all"]["500"] == 1.0
    table = out.getvalue()
    assert "| hybrid | all | 1 |" in table
    assert "via a turn's retrieval:" in table
    assert "| turn | all | 1 |" in table
    assert "mean tokens injected per turn: @500" in table
