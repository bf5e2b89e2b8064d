"""Answers of streams cut by a dead process: a drop-in stream journals where its answer
goes (`lcm.dropin_place`) and every upstream wire event; a journal still there when the
server starts, whose writer is gone, is replayed through the provider's own stream reader
(providers/replay.py) and its partial answer stored, marked incomplete, then removed."""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings

from providers.config import model_get
from providers.errors import ModelConfigError
from providers.replay import response_from_raw_events
from turns.journal import CLOSE_EVENT, OPEN_EVENT, read_entries, writer_alive

logger = logging.getLogger("lcm.dropin")

PLACE_EVENT = "lcm.dropin_place"


def journal_dir() -> Path:
    directory = Path(settings.DATA_DIR) / "dropin-streams"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _spec(model: str, wire: str | None):
    if wire is None:
        return model_get(model)
    from dropin.upstream_specs import spec_for
    from dropin.wires import anthropic, openai_responses

    passthrough = {w.NAME: w.PASSTHROUGH for w in (anthropic, openai_responses)}[wire]
    return spec_for(model, passthrough)


def recover_journals() -> int:
    """Store the answers of abandoned stream journals; returns how many were stored."""
    from dropin.services import AnswerPlace, answer_store

    stored = 0
    for path in sorted(journal_dir().glob("*.jsonl")):
        entries = read_entries(path)
        if writer_alive(path, entries):
            continue
        place = next((e["payload"] for e in entries if e["event_type"] == PLACE_EVENT), None)
        if place is None:
            path.unlink(missing_ok=True)
            continue
        wire = place.pop("wire", None)
        try:
            spec = _spec(place.pop("model"), wire)
        except ModelConfigError:
            logger.warning("drop-in journal %s names a model no longer configured", path.name)
            continue
        events = [
            (e["event_type"], e.get("payload") or {})
            for e in entries
            if e["event_type"] not in (OPEN_EVENT, CLOSE_EVENT, PLACE_EVENT)
        ]
        response = response_from_raw_events(spec, {}, events)
        try:
            raw = (response.raw_response or {}).get("content") if wire else None
            answer_store(
                place=AnswerPlace(**place), blocks=response.blocks, status="incomplete", raw=raw
            )
        except Exception:
            logger.exception("recovering drop-in journal %s failed", path.name)
            continue
        path.unlink(missing_ok=True)
        stored += 1
    return stored
