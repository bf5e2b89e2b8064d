"""Shared pytest fixtures; `tests/conftest.py` loads them with
`pytest_plugins = ["tests.support.fixtures"]`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.fake_messages_api import FakeMessagesAPI


@pytest.fixture
def fake_messages_api() -> Iterator[FakeMessagesAPI]:
    """A running fake Anthropic Messages API (see tests/support/fake_messages_api.py);
    point the SDK at `fake_messages_api.base_url` and script it with `.enqueue(...)`."""
    with FakeMessagesAPI() as api:
        yield api
