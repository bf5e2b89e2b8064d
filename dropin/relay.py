"""Answers sent back to the client in its wire's stream format: the upstream's stream
relayed event by event while each raw upstream event is journaled (so a process that dies
mid-stream leaves its answer recoverable, dropin/recovery.py) and the answer stored at the
end (a partial one, marked incomplete, when the client goes away), or a whole answer
replayed as a stream (the memory tool loop ran first)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import asdict

from django.db import close_old_connections

from dropin import recovery, services
from providers import blocks
from providers.base import Finished, RawEvent, TextDelta, ToolCallDelta, ToolCallStart
from turns.journal import StreamJournal

logger = logging.getLogger("lcm.dropin")


def relayed(wire, parsed, first, events, *, place, model, answer_id: str) -> Iterator[bytes]:
    """The wire's stream bytes for the upstream `events` (`first` already read)."""
    writer = wire.StreamWriter(parsed, answer_id)
    journal = journal_for(answer_id, model, place)
    collected: list = []
    finished = None
    stored = False
    try:
        yield from writer.start()
        pending = [first]
        while True:
            event = pending.pop() if pending else next(events, None)
            if event is None:
                break
            if isinstance(event, Finished):
                finished = event.response
                break
            if isinstance(event, RawEvent):
                journal.write(event.event_type, event.payload)
                continue
            collected.append(event)
            yield from writer.event(event)
        if finished is not None:
            services.answer_store(
                place=place, blocks=finished.blocks, status=finished.outcome["status"]
            )
            stored = True
            yield from writer.finish(finished)
            if hasattr(writer, "remember"):  # a wire that keeps its answers
                writer.remember(place.conversation_id)
    finally:
        if finished is None:  # the client went away: keep what came, marked incomplete
            events.close()
            try:
                services.answer_store(
                    place=place, blocks=_partial_blocks(collected), status="incomplete"
                )
                stored = True
            except Exception:
                logger.exception("storing a partial drop-in answer failed")
        journal.close()
        if stored:  # the conversation holds the answer: the journal has done its job
            journal.path.unlink(missing_ok=True)
        close_old_connections()


def replayed(wire, parsed, response, answer_id: str) -> Iterator[bytes]:
    """A whole response as the wire's stream (the memory tool loop ran before it)."""
    writer = wire.StreamWriter(parsed, answer_id)
    yield from writer.start()
    for index, block in enumerate(response.blocks):
        if block["type"] == "text" and block["text"]:
            yield from writer.event(TextDelta(index, block["text"]))
        elif block["type"] == "tool_use":
            yield from writer.event(ToolCallStart(index, block["id"], block["name"]))
            yield from writer.event(ToolCallDelta(index, json.dumps(block["input"])))
    yield from writer.finish(response)


def journal_for(
    answer_id: str, spec, place: services.AnswerPlace, *, wire: str | None = None
) -> StreamJournal:
    """The stream's journal: where its answer goes, then every upstream wire event as it
    arrives (handed to the OS at least every 250 ms, fsynced every 2 s, as a turn's); kept
    until the answer is stored (no header, so no credential, is ever written). One left behind by a process that died mid-stream is
    stored, incomplete, when the server starts again (dropin/recovery.py)."""
    journal = StreamJournal(
        step_id=answer_id,
        provider=spec.provider,
        path=recovery.journal_dir() / f"{answer_id}.jsonl",
    )
    # `wire`: a passed-through answer (its model may be one the configuration does not list).
    extra = {"wire": wire} if wire else {}
    journal.write(recovery.PLACE_EVENT, {"model": spec.name, **extra, **asdict(place)})
    return journal


def _partial_blocks(events: list) -> list[dict]:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return [blocks.text(text)] if text else []


def served(request, chunks: Iterator[bytes]):
    """`chunks` as the server can stream them: under ASGI (lcm_serve) an async iterator
    that pulls each chunk in a worker thread (Django would otherwise read a sync iterator
    to its end before sending a byte); under WSGI the iterator itself. Closing it (the
    client went away) closes `chunks`, so the answer so far is still stored."""
    from django.core.handlers.asgi import ASGIRequest

    if not isinstance(request, ASGIRequest):
        return chunks
    from asgiref.sync import sync_to_async

    pull = sync_to_async(next, thread_sensitive=False)

    async def pulled():
        try:
            while True:
                chunk = await pull(chunks, None)
                if chunk is None:
                    return
                yield chunk
        finally:
            await sync_to_async(chunks.close, thread_sensitive=False)()

    return pulled()
