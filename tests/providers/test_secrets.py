"""Keys never leak, and every outbound prompt text goes through the redaction hook."""

from __future__ import annotations

import json
import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers import blocks
from providers.config import model_get
from providers.errors import ProviderError
from providers.redaction import redact_secrets
from providers.registry import provider_for
from tests.providers.helpers import TOOL, finished, make_request
from tests.support.fake_messages_api import (
    anthropic_error_stream,
    anthropic_text_stream,
    authentication_error,
    rate_limited,
)
from tests.support.fake_responses_api import (
    responses_auth_error,
    responses_error_event_stream,
    responses_rate_limited,
    responses_text_stream,
)

ANTHROPIC_CANARY = "sk-ant-canary-XXXX"
OPENAI_CANARY = "sk-canary-openai-YYYY"

SECRETS = {
    "anthropic_key": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "openai_key": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789",
    "github_token": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "aws_access_key_id": "AKIAIOSFODNN7EXAMPLE",
}
AWS_SECRET = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
BEARER = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcDEF123"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7x\nabc123==\n-----END RSA PRIVATE KEY-----"


def leaked(canary: str, *things: object) -> bool:
    return any(canary in (t if isinstance(t, str) else json.dumps(t, default=str)) for t in things)


def all_log_text(caplog) -> str:
    return "\n".join(
        f"{r.getMessage()} {json.dumps(r.__dict__, default=str)}" for r in caplog.records
    )


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_canary_key_appears_nowhere_after_an_auth_error_a_mid_stream_error_and_a_success(
    provider, fake_messages_api, fake_responses_api, monkeypatch, caplog
):
    if provider == "anthropic":
        canary, api, spec_name = ANTHROPIC_CANARY, fake_messages_api, "sonnet"
        monkeypatch.setenv("ANTHROPIC_API_KEY", canary)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        # a provider that echoes the key back in its error message
        api.enqueue(
            authentication_error().__class__(
                401,
                {
                    "type": "error",
                    "error": {
                        "type": "authentication_error",
                        "message": f"invalid x-api-key {canary}",
                    },
                },
            ),
            anthropic_error_stream("api_error", f"upstream saw key {canary}"),
            rate_limited(retry_after=0),  # a retry: the path that logs
            anthropic_text_stream("all good"),
        )
    else:
        canary, api, spec_name = OPENAI_CANARY, fake_responses_api, "gpt"
        monkeypatch.setenv("OPENAI_API_KEY", canary)
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        refused = responses_auth_error()
        refused.body["error"]["message"] = f"Incorrect API key provided: {canary}"
        api.enqueue(
            refused,
            responses_error_event_stream("server_error", f"upstream saw key {canary}"),
            responses_rate_limited(retry_after=0),
            responses_text_stream("all good"),
        )
    spec = model_get(spec_name)
    request = make_request(spec, "hello", tools=[TOOL])
    seen: list[object] = []
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ProviderError) as refused_error:
            list(provider_for(spec).stream(request))
        seen += [str(refused_error.value), repr(refused_error.value), refused_error.value.as_dict()]
        failed = finished(list(provider_for(spec).stream(request)))
        succeeded = finished(list(provider_for(spec, sleep=lambda s: None).stream(request)))

    assert failed.outcome["status"] == "failed"
    assert succeeded.outcome["status"] == "completed"
    assert len(api.requests) == 4  # every call reached the server with the key ...
    assert all(canary in json.dumps(r.headers) for r in api.requests)
    for response in (failed, succeeded):  # ... and the key went nowhere else
        seen += [response.raw_request, response.raw_response, response.as_dict()]
    assert not leaked(canary, *seen)
    assert "provider call failed, retrying" in all_log_text(caplog)
    assert not leaked(canary, all_log_text(caplog))
    assert "[REDACTED]" in str(refused_error.value)


def test_the_default_hook_masks_common_secret_shapes():
    text = " | ".join([*SECRETS.values(), AWS_SECRET, BEARER, PEM])
    redacted = redact_secrets(text)
    for kind, secret in SECRETS.items():
        assert secret not in redacted
        assert f"[REDACTED:{kind}]" in redacted
    assert "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" not in redacted
    assert "aws_secret_access_key = [REDACTED:aws_secret_access_key]" in redacted
    assert "Bearer [REDACTED:bearer_token]" in redacted
    assert "MIIEpAIBAAKCAQEA7x" not in redacted and "[REDACTED:private_key]" in redacted
    assert redact_secrets("plain words, sk-short, AKIA1") == "plain words, sk-short, AKIA1"


def secret_transcript() -> list[dict]:
    return [
        blocks.message("user", f"my key is {SECRETS['openai_key']}"),
        blocks.message("assistant", [blocks.tool_use("toolu_1", "get_weather", {"city": "X"})]),
        blocks.message("user", [blocks.tool_result("toolu_1", f"env: {SECRETS['github_token']}")]),
    ]


def test_every_adapter_redacts_system_text_and_tool_results(anthropic_env, openai_env):
    anthropic_env.enqueue(anthropic_text_stream("ok"))
    openai_env.enqueue(responses_text_stream("ok"))
    for name in ("sonnet", "gpt", "offline"):
        spec = model_get(name)
        request = make_request(
            spec,
            system=f"deploy with {SECRETS['aws_access_key_id']}",
            messages=secret_transcript(),
            tools=[TOOL],
        )
        response = finished(list(provider_for(spec).stream(request)))
        sent = json.dumps(response.raw_request)
        for secret in (
            SECRETS["openai_key"],
            SECRETS["github_token"],
            SECRETS["aws_access_key_id"],
        ):
            assert secret not in sent, (name, secret)
        assert "[REDACTED:github_token]" in sent and "[REDACTED:aws_access_key_id]" in sent
    for api in (anthropic_env, openai_env):
        wire = api.requests[0].raw.decode()
        assert SECRETS["openai_key"] not in wire and SECRETS["github_token"] not in wire


def shout(text: str) -> str:
    return text.upper()


def test_a_custom_hook_is_used_and_an_empty_one_turns_redaction_off(anthropic_env, monkeypatch):
    spec = model_get("sonnet")
    anthropic_env.enqueue(anthropic_text_stream("a"), anthropic_text_stream("b"))
    monkeypatch.setenv("LCM_REDACTION_HOOK", "tests.providers.test_secrets.shout")
    list(provider_for(spec).stream(make_request(spec, "quiet please", system="sys")))
    monkeypatch.setenv("LCM_REDACTION_HOOK", "")
    list(provider_for(spec).stream(make_request(spec, f"k {SECRETS['openai_key']}", system="")))
    first, second = (r.body for r in anthropic_env.requests)
    assert first["system"] == "SYS" and first["messages"][0]["content"] == "QUIET PLEASE"
    assert second["messages"][0]["content"] == f"k {SECRETS['openai_key']}"


def test_a_bad_hook_is_a_configuration_error_and_nothing_is_sent(anthropic_env, monkeypatch):
    monkeypatch.setenv("LCM_REDACTION_HOOK", "providers.redaction.no_such_function")
    spec = model_get("sonnet")
    with pytest.raises(
        ImproperlyConfigured, match="LCM_REDACTION_HOOK='providers.redaction.no_such_function'"
    ):
        list(provider_for(spec).stream(make_request(spec)))
    assert anthropic_env.requests == []
