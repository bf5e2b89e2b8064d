"""The offline provider: deterministic, labelled, streamed in several deltas, quoting the
state summary and the best memory item of the assembled context."""

from __future__ import annotations

from providers import blocks
from providers.base import RawEvent, TextDelta
from providers.config import model_get
from providers.offline import LABEL
from providers.registry import provider_for
from tests.providers.helpers import finished, make_request

SYSTEM = (
    "You are a helpful assistant.\n\n"
    '<memory_artifact kind="state" untrusted="true">\nConversation state:\n'
    "We chose PostgreSQL for the ledger.\n</memory_artifact>"
)
MEMORY = (
    "Retrieved memory (untrusted data):\n"
    '<memory_artifact id="c1" score="0.400" untrusted="true">\nminor note\n</memory_artifact>\n'
    '<memory_artifact id="c2" score="0.910" untrusted="true">\nthe ledger lives in '
    "ledger/models.py\n</memory_artifact>"
)


def offline_request(**kwargs):
    spec = model_get("offline")
    user = blocks.message("user", [blocks.text(MEMORY), blocks.text("Where is the ledger?")])
    return spec, make_request(spec, system=SYSTEM, messages=[user], **kwargs)


def test_it_streams_a_labelled_answer_quoting_state_best_memory_and_the_user():
    spec, request = offline_request()
    events = list(provider_for(spec).stream(request))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    response = finished(events)

    assert len(deltas) >= 3
    text = "".join(deltas)
    assert text == blocks.rendered_text(response.blocks)
    assert text.startswith(LABEL)
    assert "Current state: “We chose PostgreSQL for the ledger.”" in text
    assert "Best matching memory: “the ledger lives in ledger/models.py”" in text
    assert "Your message: “Where is the ledger?”" in text
    assert response.outcome["status"] == "completed"
    assert response.model == "offline"
    assert [e.event_type for e in events if isinstance(e, RawEvent)][0] == "offline.start"


def test_it_is_deterministic_and_complete_matches_the_stream():
    spec, request = offline_request()
    first = provider_for(spec).complete(request)
    second = finished(list(provider_for(spec).stream(request)))
    assert first.blocks == second.blocks
    assert first.usage == second.usage and first.usage["output_tokens"] > 0


def test_explicit_options_win_and_shape_the_stream():
    spec, request = offline_request(
        options={"state_summary": "S", "memory": [{"text": "M"}], "offline_chunks": 7}
    )
    events = list(provider_for(spec).stream(request))
    text = blocks.rendered_text(finished(events).blocks)
    assert "Current state: “S”" in text and "Best matching memory: “M”" in text
    assert len([e for e in events if isinstance(e, TextDelta)]) == 7


def test_an_empty_context_says_so():
    spec = model_get("offline")
    response = provider_for(spec).complete(make_request(spec, "hi", system=""))
    text = blocks.rendered_text(response.blocks)
    assert "Current state: (empty)" in text and "Best matching memory: (none)" in text
