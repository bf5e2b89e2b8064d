"""The provider-name-to-adapter table (`providers.registry`)."""

from __future__ import annotations

import dataclasses

import pytest
from django.utils.module_loading import import_string

from providers.config import OFFLINE, PROVIDERS
from providers.offline import OfflineProvider
from providers.registry import ADAPTERS, provider_for


def test_every_configurable_provider_has_an_adapter_and_no_other():
    assert sorted(ADAPTERS) == sorted(PROVIDERS)


def test_each_name_leads_to_the_adapter_of_that_provider():
    assert {name: import_string(path).name for name, path in ADAPTERS.items()} == {
        name: name for name in PROVIDERS
    }
    assert isinstance(provider_for(OFFLINE), OfflineProvider)


def test_a_provider_without_an_adapter_is_refused():
    spec = dataclasses.replace(OFFLINE, provider="carrier_pigeon")
    with pytest.raises(ValueError, match="no adapter for provider 'carrier_pigeon'"):
        provider_for(spec)
