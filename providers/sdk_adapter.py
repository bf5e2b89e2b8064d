"""What every adapter over an official SDK shares: the client (SDK retries off, the
process's connection pool), redaction, the call with retries and error mapping
(providers/calls.py), and the stream loop. An adapter says only what its wire differs in:
the request body (`build_params`), the SDK call (`create`), how a whole response maps to
ours (`response_from_raw`) and how its stream's events do (`stream_reader`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from providers import observe
from providers.base import Finished, ProviderRequest, ProviderResponse, RawEvent, StreamEvent
from providers.calls import (
    WireEvents,
    call_with_retries,
    default_max_retries,
    default_timeout,
    shared_http_client,
)
from providers.config import ModelSpec, base_url, require_key
from providers.guard import CallGuard
from providers.redaction import redact_request_texts


def make_sdk_client(
    sdk: ModuleType,
    *,
    api_key: str,
    base_url: str | None = None,
    timeout: float | None = None,
    shared: bool = False,
) -> Any:
    """A client of `sdk` (`anthropic` or `openai`) with the SDK's retries off (ours honour
    retry-after and count attempts). `shared=True` puts it on the process's connection
    pool: never close such a client."""
    client_class = sdk.Anthropic if sdk.__name__ == "anthropic" else sdk.OpenAI
    return client_class(
        api_key=api_key,
        base_url=base_url,
        timeout=default_timeout() if timeout is None else timeout,
        max_retries=0,
        http_client=shared_http_client(sdk) if shared else None,
    )


class SdkAdapter:
    """A provider over an official SDK; subclasses fill in the wire."""

    name: str  # the provider name in config, errors and metrics
    sdk: ModuleType
    # Which field of an SDK error body names the error: "type" (Anthropic) or "code".
    error_field = "type"

    def __init__(
        self,
        spec: ModelSpec,
        *,
        client: Any | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        guard: CallGuard | None = None,
    ) -> None:
        """`client` is for callers that hold one (the compaction summarizer); without it a
        client is made per call from the key in the environment, on the shared pool."""
        self.spec = spec
        self.client = client
        self.timeout = default_timeout() if timeout is None else timeout
        self.max_retries = default_max_retries() if max_retries is None else max_retries
        self.sleep = sleep
        self.guard = guard

    # What an adapter defines ---------------------------------------------------------------

    def build_params(self, request: ProviderRequest) -> dict:
        """The wire body for `request` (already redacted)."""
        raise NotImplementedError

    def create(self, client: Any, params: dict, *, stream: bool) -> Any:
        """The SDK call: a raw event stream when `stream`, else the whole response."""
        raise NotImplementedError

    def response_from_raw(
        self, raw_request: dict, raw: dict, secrets: tuple[str, ...]
    ) -> ProviderResponse:
        raise NotImplementedError

    def stream_reader(self, raw_request: dict, secrets: tuple[str, ...]) -> Any:
        """An object whose `read(response_stream)` yields our stream events."""
        raise NotImplementedError

    # Calls ---------------------------------------------------------------------------------

    def stream(self, request: ProviderRequest) -> Iterator[StreamEvent]:
        request = redact_request_texts(request)
        params = self.build_params(request)
        raw_request = {**params, "stream": True}
        client, secrets = self._client()
        call, watched = self._watch(client, request, raw_request)
        response, error = None, None
        try:
            with observe.sending(call if watched else None):
                response_stream = self._open(client, request, secrets, params, stream=True)
            for event in self.stream_reader(raw_request, secrets).read(response_stream):
                if isinstance(event, Finished):
                    # Recorded before the caller sees the end: a caller that stops
                    # reading at Finished never leaves the receipt to the collector.
                    observe.call_finish(call, watched, event.response, None)
                    watched = False
                yield event
        except Exception as failure:
            error = failure
            raise
        finally:
            observe.call_finish(call, watched, response, error)

    def complete(self, request: ProviderRequest) -> ProviderResponse:
        """One non-streaming call (summaries, expansion): same request, same mapping."""
        request = redact_request_texts(request)
        params = self.build_params(request)
        client, secrets = self._client()
        call, watched = self._watch(client, request, params)
        response, error = None, None
        try:
            with observe.sending(call if watched else None):
                raw = self._open(client, request, secrets, params, stream=False)
            response = self.response_from_raw(params, raw.model_dump(mode="json"), secrets)
            return response
        except Exception as failure:
            error = failure
            raise
        finally:
            observe.call_finish(call, watched, response, error)

    def _watch(self, client, request: ProviderRequest, params: dict):
        """The call as observers see it (a receipt), its body read by the HTTP hook."""
        call = observe.UpstreamCall(
            provider=self.name,
            model=str(params.get("model") or self.spec.model_id),
            purpose=request.purpose,
            conversation_id=request.conversation_id,
            upstream=str(getattr(client, "base_url", "") or ""),
            params=params,
            cache_ttl=self.spec.cache_ttl,
        )
        if not observe.observing():
            return call, False
        observe.hook_client(client)
        return call, observe.call_begin(call)

    def _client(self) -> tuple[Any, tuple[str, ...]]:
        if self.client is not None:
            return self.client, (self.client.api_key or "",)
        key = require_key(self.spec)
        client = make_sdk_client(
            self.sdk, api_key=key, base_url=base_url(self.spec), timeout=self.timeout, shared=True
        )
        return client, (key,)

    def _open(self, client, request: ProviderRequest, secrets, params: dict, *, stream: bool):
        return call_with_retries(
            lambda: self.create(client, params, stream=stream),
            sdk=self.sdk,
            provider=self.name,
            max_retries=self.max_retries,
            timeout=self.timeout,
            sleep=self.sleep,
            secrets=secrets,
            prefer=self.error_field,
            guard=self.guard,
            conversation_id=request.conversation_id,
            purpose=request.purpose,
        )


class WireStreamReader:
    """The stream loop of every SDK adapter: each wire event reaches the journal as a
    `RawEvent` (unknown types included), then the adapter applies it; the loop ends at the
    wire's last event or its error, always closes the response, and finishes with the
    accumulated response (`incomplete` when the connection broke first)."""

    provider: str

    def raw_events(self, response_stream) -> Any:
        """The SDK stream's raw server-sent events."""
        raise NotImplementedError

    def _apply(self, event_type: str, payload: dict) -> Iterator[StreamEvent]:
        raise NotImplementedError

    def done(self) -> bool:
        raise NotImplementedError

    def _response(self, broken: str | None) -> ProviderResponse:
        raise NotImplementedError

    def read(self, response_stream) -> Iterator[StreamEvent]:
        wire = WireEvents(self.raw_events(response_stream), self.provider)
        try:
            for event_type, payload in wire:
                yield RawEvent(event_type, payload, wire.data)
                yield from self._apply(event_type, payload)
                if self.done():
                    break
        finally:
            response_stream.response.close()
        yield Finished(self._response(wire.broken))
