from __future__ import annotations

import pytest

# The drop-in's fixtures: the real server, the SDK clients, the three recording upstreams.
from tests.dropin.conftest import (  # noqa: F401
    caller,
    claude,
    clean_provider_env,
    oai,
    upstreams,
)
from tests.support.fake_messages_api import FakeMessagesAPI


@pytest.fixture
def cached_anthropic(monkeypatch):
    """A local Anthropic-wire upstream that keeps the provider's prompt cache."""
    with FakeMessagesAPI(prompt_cache=True) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        yield api
