"""One module per wire the drop-in serves. The request pipeline (dropin/pipeline.py) knows
a wire only through this interface, so a new wire is one new module here plus one view:

- `NAME` (str): the wire's name, as stored in `DropinRequest.wire`;
- `ID_PREFIX` (str): how the wire's answer ids begin (`msg_`, `chatcmpl-`, ...);
- `parse(body: dict) -> DropinRequest`: the JSON body checked and parsed into our blocks;
  raises `DropinError` (rendered in the wire's shape, nothing stored);
- `response_body(parsed, response, answer_id) -> dict`: a whole answer in the wire's shape;
- `StreamWriter(parsed, answer_id)`: `start()`, `event(stream_event)`, `finish(response)`,
  `error(DropinError)`, each yielding the wire's stream bytes;
- `error_body(error: DropinError) -> dict`: the wire's error shape.

Optional, for a wire whose own upstream gets the client's request as it came
(dropin/forward.py, the same-wire pass-through): `PASSTHROUGH` (a `Passthrough`),
`forward_body(body, raw, *, model_id, replaced, mark=False) -> bytes` (the bytes sent:
the client's own but for what the server replaces on purpose) and
`answer_from_body(spec, raw: dict) -> ProviderResponse | None` (a whole answer read for
storing; a streamed one is read by the provider's own stream reader, providers/replay.py).

Optional, for a stateful wire (the Responses wire): `resolve(body, user=)` (the body
continuing a stored answer), `remember(parsed, conversation_id=, answer=)` (an answer
kept), `session_key(parsed, owner=)` (the conversation an agent's session names).

`Wire` below states the same as a typing Protocol (modules satisfy it structurally).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from dropin.errors import DropinError
from dropin.requests import DropinRequest


class Wire(Protocol):
    NAME: str
    ID_PREFIX: str

    def parse(self, body: dict) -> DropinRequest: ...

    def response_body(self, parsed: DropinRequest, response, answer_id: str) -> dict: ...

    def error_body(self, error: DropinError) -> dict: ...


@dataclass(frozen=True)
class Passthrough:
    """A wire that can pass a request through to an upstream speaking the same wire
    (optional: a wire module's `PASSTHROUGH`, with `forward_body(body, raw, model_id=,
    replaced=)` giving the bytes sent). `provider`: the configured models of that provider
    are served by forwarding; a model name the configuration does not list goes, unchanged,
    to `base_url_env` (else `default_base_url`) with the key in `api_key_env`."""

    provider: str
    prefix: str  # the wire's path prefix here; the rest of the path goes upstream
    api_key_env: str
    base_url_env: str
    default_base_url: str
    key_header: str  # where a server-held key goes
    key_prefix: str = ""  # before the key in that header ("Bearer ")
