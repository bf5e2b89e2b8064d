"""Models and engine settings from LCM_CONFIG_FILE (SRD 18) and environment overrides."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers import config
from providers.config import (
    ModelSpec,
    api_key,
    default_model,
    engine_config,
    model_get,
    models,
    require_key,
)
from providers.errors import MissingKey, UnknownModel

ROOT = Path(__file__).resolve().parents[2]

FULL_EXAMPLE = """
[general]
default_model = "sonnet"
data_dir = "~/.contextinfinity"

[budget]
response_reserve_tokens = 4000
safety_margin_tokens = 1500
max_retrieval_tokens = 6000

[stream]
flush_ms = 250
flush_bytes = 8192
fsync_ms = 2000

[tools]
mode = "disabled"        # disabled | parse_only | enabled
allow_parallel = false

[retrieval]
embedding_model = "text-embedding-3-small"
top_k = 6
overfetch_k = 16
similarity_threshold = 0.72
enable_mmr = true

[models.sonnet]
provider = "anthropic"
model_id = "claude-sonnet-4-20250514"
context_limit = 200000
api_key_env = "ANTHROPIC_API_KEY"

[models.gpt]
provider = "openai"
model_id = "gpt-5.2"
context_limit = 400000
api_key_env = "OPENAI_API_KEY"

[openai]
truncation = "disabled"
store = false
parallel_tool_calls = false

[anthropic]
disable_parallel_tool_use = true
"""


@pytest.fixture
def config_file(tmp_path, monkeypatch):
    def write(text: str) -> Path:
        path = tmp_path / "config.toml"
        path.write_text(text)
        monkeypatch.setenv("LCM_CONFIG_FILE", str(path))
        return path

    return write


def names() -> list[str]:
    return [spec.name for spec in models()]


def test_without_a_file_the_built_in_models_are_offered_and_offline_is_the_default():
    assert names() == ["offline", "sonnet", "haiku", "gpt"]
    assert default_model().name == "offline"
    assert model_get("haiku") == ModelSpec(
        "haiku",
        "anthropic",
        "claude-haiku-4-5",
        200_000,
        8192,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    )
    assert engine_config() == config.EngineConfig()


def test_the_first_model_with_a_key_is_the_default(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert default_model().name == "gpt"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    assert default_model().name == "sonnet"


def test_the_srd_example_file_is_read_whole(config_file):
    config_file(FULL_EXAMPLE)
    assert names() == ["offline", "sonnet", "gpt"]  # the file's models replace the built-ins
    assert model_get("sonnet").model_id == "claude-sonnet-4-20250514"
    assert model_get("gpt") == ModelSpec(
        "gpt", "openai", "gpt-5.2", 400_000, 4096, "OPENAI_API_KEY", "OPENAI_BASE_URL"
    )
    assert default_model().name == "sonnet"  # named, even without its key
    engine = engine_config()
    assert engine.budget == config.BudgetConfig(4000, 1500, 6000)
    assert engine.stream == config.StreamConfig(250, 8192, 2000)
    assert engine.tools == config.ToolsConfig("disabled", False)
    assert engine.general == config.GeneralConfig("sonnet")  # data_dir: read, then ignored
    assert engine.openai == config.OpenAIConfig("disabled", False, False, True)
    assert engine.anthropic.disable_parallel_tool_use is True
    assert engine.source is not None and engine.source.endswith("config.toml")


def test_the_retired_srd_keys_still_load_and_each_is_named_once_in_a_warning(config_file, caplog):
    path = config_file(FULL_EXAMPLE)
    with caplog.at_level(logging.WARNING, logger="providers"):
        engine = engine_config()
        assert engine_config() == engine  # the file is read again: no second warning
        assert names() == ["offline", "sonnet", "gpt"]
    assert [r.getMessage() for r in caplog.records if r.name == "providers"] == [
        f"{path}: [retrieval] is no longer read (retrieval reads the LCM_RETRIEVAL_* "
        "settings); ignored, remove it",
        f"{path}: general.data_dir is no longer read (the server uses LCM_DATA_DIR); "
        "ignored, remove it",
    ]
    assert not hasattr(engine, "retrieval")
    assert "data_dir" not in {f.name for f in dataclasses.fields(config.GeneralConfig)}


def test_a_retired_key_is_ignored_whatever_it_holds(config_file, caplog):
    path = config_file('[general]\ndata_dir = 7\n\n[retrieval]\ntop_k = 0\nnew_key = "x"\n')
    with caplog.at_level(logging.WARNING, logger="providers"):
        assert engine_config() == config.EngineConfig(source=str(path))
    assert [r.getMessage().split(" is no longer read")[0] for r in caplog.records] == [
        f"{path}: [retrieval]",
        f"{path}: general.data_dir",
    ]


def test_a_file_without_retired_keys_logs_no_warning(config_file, caplog):
    config_file('[general]\ndefault_model = "gpt"\n')
    with caplog.at_level(logging.WARNING, logger="providers"):
        assert default_model().name == "gpt"
    assert caplog.records == []


def test_environment_overrides_win(config_file, monkeypatch):
    config_file(FULL_EXAMPLE)
    monkeypatch.setenv("LCM_DEFAULT_MODEL", "gpt")
    monkeypatch.setenv("LCM_MODEL_GPT_MODEL_ID", "gpt-5.5")
    monkeypatch.setenv("LCM_MODEL_GPT_CONTEXT_LIMIT", "128000")
    monkeypatch.setenv("LCM_MODEL_GPT_API_KEY_ENV", "WORK_OPENAI_KEY")
    monkeypatch.setenv("LCM_MODEL_LOCAL_PROVIDER", "openai")
    monkeypatch.setenv("LCM_MODEL_LOCAL_MODEL_ID", "llama-4")
    monkeypatch.setenv("LCM_MODEL_LOCAL_CONTEXT_LIMIT", "32768")
    monkeypatch.setenv("LCM_MODEL_LOCAL_BASE_URL_ENV", "LOCAL_LLM_URL")

    assert default_model().name == "gpt"
    gpt = model_get("gpt")
    assert (gpt.model_id, gpt.context_limit, gpt.api_key_env) == (
        "gpt-5.5",
        128_000,
        "WORK_OPENAI_KEY",
    )
    assert model_get("local") == ModelSpec(
        "local", "openai", "llama-4", 32_768, 4096, "OPENAI_API_KEY", "LOCAL_LLM_URL"
    )
    assert names() == ["offline", "sonnet", "gpt", "local"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[budget\n", "not valid TOML"),
        (
            '[budget]\nresponse_reserve_tokens = "many"\n',
            "budget.response_reserve_tokens='many' is invalid: expected int",
        ),
        ("[budget]\nreserve = 1\n", "unknown key budget.reserve"),
        (
            '[tools]\nmode = "sometimes"\n',
            "tools.mode='sometimes' must be one of disabled, parse_only, enabled",
        ),
        ('[openai]\nstore = "no"\n', "openai.store='no' is invalid: expected bool"),
        ("[stream]\nflush_ms = 0\n", "stream.flush_ms=0 must be >= 1"),
        (
            '[models.x]\nprovider = "acme"\nmodel_id = "m"\ncontext_limit = 8000\n',
            "models.x.provider='acme' must be one of anthropic, openai, openai_chat, offline",
        ),
        (
            '[models.x]\nprovider = "openai"\ncontext_limit = 8000\n',
            "models.x.model_id is required",
        ),
        (
            '[models.x]\nprovider = "openai"\nmodel_id = "m"\n',
            "models.x.context_limit=0 must be >= 1024",
        ),
        (
            '[models.x]\nprovider = "openai"\nmodel_id = "m"\ncontext_limit = 8000\napi_key = "sk-1"\n',
            "models.x.api_key is not a model setting",
        ),
        (
            '[general]\ndefault_model = "nope"\n',
            "general.default_model='nope' names no configured model",
        ),
    ],
)
def test_a_bad_file_names_the_file_and_the_key(config_file, text, message):
    path = config_file(text)
    with pytest.raises(ImproperlyConfigured) as bad:
        models()
    assert message in str(bad.value)
    assert str(path) in str(bad.value)


def test_a_missing_file_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("LCM_CONFIG_FILE", str(tmp_path / "absent.toml"))
    with pytest.raises(ImproperlyConfigured, match="LCM_CONFIG_FILE=.*absent.toml.*no such file"):
        models()


def test_a_bad_override_names_the_variable(monkeypatch):
    monkeypatch.setenv("LCM_MODEL_SONNET_CONTEXT_LIMIT", "lots")
    with pytest.raises(ImproperlyConfigured, match="LCM_MODEL_SONNET_CONTEXT_LIMIT='lots'"):
        models()
    monkeypatch.delenv("LCM_MODEL_SONNET_CONTEXT_LIMIT")
    monkeypatch.setenv("LCM_DEFAULT_MODEL", "ghost")
    with pytest.raises(ImproperlyConfigured, match="LCM_DEFAULT_MODEL='ghost' names no configured"):
        default_model()


@pytest.mark.process(portable=True)
def test_a_bad_file_stops_start_up(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[tools]\nmode = "sometimes"\n')
    env = {**os.environ, "LCM_CONFIG_FILE": str(path), "LCM_DATA_DIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert f"{path}: tools.mode='sometimes' must be one of" in result.stderr


def test_an_unknown_model_lists_the_configured_ones():
    with pytest.raises(UnknownModel) as unknown:
        model_get("claude-9")
    assert unknown.value.configured == ["offline", "sonnet", "haiku", "gpt"]
    assert str(unknown.value) == (
        "unknown model 'claude-9'; configured models: offline, sonnet, haiku, gpt"
    )


def test_keys_are_read_from_the_environment_at_call_time(monkeypatch):
    spec = model_get("sonnet")
    with pytest.raises(MissingKey) as missing:
        require_key(spec)
    assert missing.value.variable == "ANTHROPIC_API_KEY"
    assert api_key(spec) is None
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-later")
    assert require_key(spec) == "sk-ant-later"
    assert require_key(model_get("offline")) == ""


def test_the_public_description_of_a_model_carries_no_key(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value")
    described = model_get("sonnet").as_dict()
    assert described["key_present"] is True
    assert "sk-ant-secret-value" not in repr(described)


def test_a_key_in_the_file_is_refused_not_read(config_file):
    path = config_file(
        '[models.x]\nprovider = "openai"\nmodel_id = "m"\ncontext_limit = 8000\napi_key = "sk-in-file"\n'
    )
    with pytest.raises(ImproperlyConfigured) as bad:
        models()
    assert "sk-in-file" not in str(bad.value)
    assert str(path) in str(bad.value)
