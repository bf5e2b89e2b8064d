"""Models and engine settings: the SRD 18 TOML file named by LCM_CONFIG_FILE, plus
environment overrides, read at call time (a changed key or file applies to the next call).

Without a file the built-in models are `offline` (always), `sonnet` and `haiku`
(Anthropic, key ANTHROPIC_API_KEY) and `gpt` (OpenAI, key OPENAI_API_KEY). A file with a
`[models.*]` table replaces the built-ins (`offline` stays). Environment overrides:

- LCM_DEFAULT_MODEL wins over `[general] default_model`;
- LCM_MODEL_<NAME>_<FIELD> overrides one field of model <NAME> (upper-case name, `-` as
  `_`), FIELD one of PROVIDER, MODEL_ID, CONTEXT_LIMIT, MAX_OUTPUT_TOKENS, API_KEY_ENV,
  BASE_URL_ENV; a new <NAME> with PROVIDER and MODEL_ID set adds a model.

A bad file or override raises `ImproperlyConfigured` naming the file and the key; the app's
`ready()` calls `check()` so a bad file stops start-up. Keys are never read from the file:
only the name of the variable that holds one is.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from providers.caching import CACHE_MODES, CACHE_TTLS
from providers.errors import MissingKey, UnknownModel

logger = logging.getLogger("providers")

PROVIDERS = ("anthropic", "openai", "openai_chat", "offline")
TOOLS_MODES = ("disabled", "parse_only", "enabled")
TRUNCATION_MODES = ("disabled", "auto")


@dataclass(frozen=True)
class ModelSpec:
    name: str  # config key, e.g. "sonnet", "offline"
    provider: str  # "anthropic" | "openai" | "openai_chat" | "offline"
    model_id: str
    context_limit: int
    max_output_tokens: int
    api_key_env: str | None  # None for offline
    base_url_env: str | None  # e.g. ANTHROPIC_BASE_URL / OPENAI_BASE_URL
    # Prompt caching (providers/caching.py, docs/cost.md): "auto" marks the stable prefix
    # (Anthropic cache_control, OpenAI prompt_cache_key), "off" sends no marker; the TTL
    # of Anthropic's cache entries, "5m" or "1h" (writes cost 1.25x or 2x the input price).
    cache: str = "auto"
    cache_ttl: str = "5m"

    def as_dict(self) -> dict:
        """Public description (no key, only the variable's name and whether it is set)."""
        return {
            "name": self.name,
            "provider": self.provider,
            "model_id": self.model_id,
            "context_limit": self.context_limit,
            "max_output_tokens": self.max_output_tokens,
            "cache": self.cache,
            "cache_ttl": self.cache_ttl,
            "api_key_env": self.api_key_env,
            "key_present": self.provider == "offline" or api_key(self) is not None,
        }


OFFLINE = ModelSpec("offline", "offline", "offline", 32_768, 1024, None, None)
BUILTIN_MODELS = (
    OFFLINE,
    ModelSpec(
        "sonnet",
        "anthropic",
        "claude-sonnet-5-5",
        200_000,
        8192,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ),
    ModelSpec(
        "haiku",
        "anthropic",
        "claude-haiku-4-5",
        200_000,
        8192,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
    ),
    ModelSpec("gpt", "openai", "gpt-5.5", 400_000, 8192, "OPENAI_API_KEY", "OPENAI_BASE_URL"),
)
_DEFAULT_KEY_ENV = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    # The Chat Completions wire (local and hosted compatible servers): its own variables,
    # so a local server and OpenAI's Responses API can be configured side by side.
    "openai_chat": "OPENAI_CHAT_API_KEY",
}
_DEFAULT_BASE_URL_ENV = {
    "anthropic": "ANTHROPIC_BASE_URL",
    "openai": "OPENAI_BASE_URL",
    "openai_chat": "OPENAI_CHAT_BASE_URL",
}
DEFAULT_MAX_OUTPUT_TOKENS = 4096


# Engine settings (the other SRD 18 tables) -------------------------------------------------


@dataclass(frozen=True)
class GeneralConfig:
    default_model: str = ""


@dataclass(frozen=True)
class BudgetConfig:
    response_reserve_tokens: int = 4000
    safety_margin_tokens: int = 1500
    max_retrieval_tokens: int = 6000


@dataclass(frozen=True)
class StreamConfig:
    flush_ms: int = 250
    flush_bytes: int = 8192
    fsync_ms: int = 2000


@dataclass(frozen=True)
class ToolsConfig:
    mode: str = "disabled"  # disabled | parse_only | enabled
    allow_parallel: bool = False


@dataclass(frozen=True)
class OpenAIConfig:
    truncation: str = "disabled"  # disabled | auto
    store: bool = False
    parallel_tool_calls: bool = False
    # Ours, not SRD 18: ask for encrypted reasoning when store = false (reasoning models
    # only; turn off for a model or server that refuses `include`).
    include_encrypted_reasoning: bool = True


@dataclass(frozen=True)
class AnthropicConfig:
    disable_parallel_tool_use: bool = True


@dataclass(frozen=True)
class EngineConfig:
    general: GeneralConfig = field(default_factory=GeneralConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    stream: StreamConfig = field(default_factory=StreamConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    openai: OpenAIConfig = field(default_factory=OpenAIConfig)
    anthropic: AnthropicConfig = field(default_factory=AnthropicConfig)
    source: str | None = None  # the file read, if any


_SECTION_TYPES = {
    "general": GeneralConfig,
    "budget": BudgetConfig,
    "stream": StreamConfig,
    "tools": ToolsConfig,
    "openai": OpenAIConfig,
    "anthropic": AnthropicConfig,
}
# SRD 18 keys that nothing here reads: `[retrieval]` (a turn's retrieval and memory_search
# read the LCM_RETRIEVAL_* settings) and `[general] data_dir` (the server uses LCM_DATA_DIR).
# A file that still has them loads; each is named once in a warning, then ignored.
_RETIRED_SECTIONS = {"retrieval": "retrieval reads the LCM_RETRIEVAL_* settings"}
_RETIRED_KEYS = {("general", "data_dir"): "the server uses LCM_DATA_DIR"}
_warned: set[tuple[str, str]] = set()  # (file, key): the file is read at every call
_CHOICES = {
    ("tools", "mode"): TOOLS_MODES,
    ("openai", "truncation"): TRUNCATION_MODES,
}
_POSITIVE = {
    ("budget", "response_reserve_tokens"),
    ("stream", "flush_ms"),
    ("stream", "flush_bytes"),
    ("stream", "fsync_ms"),
}


# Loading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedConfig:
    engine: EngineConfig
    models: tuple[ModelSpec, ...]
    default_model: str  # "" when neither the file nor LCM_DEFAULT_MODEL names one


def load(environ: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read LCM_CONFIG_FILE (if set) and the overrides in `environ` (default os.environ)."""
    env = os.environ if environ is None else environ
    path = env.get("LCM_CONFIG_FILE", "").strip()
    data = _read_file(path) if path else {}
    where = path or "the environment"
    _warn_retired_sections(data, where)
    engine = _engine(data, where, path or None)
    specs = _models(data, env, where)
    default = env.get("LCM_DEFAULT_MODEL", "").strip() or engine.general.default_model
    if default and default not in {spec.name for spec in specs}:
        key = (
            "LCM_DEFAULT_MODEL"
            if env.get("LCM_DEFAULT_MODEL", "").strip()
            else "general.default_model"
        )
        raise ImproperlyConfigured(
            f"{where}: {key}={default!r} names no configured model; "
            f"configured: {', '.join(spec.name for spec in specs)}"
        )
    return LoadedConfig(engine, specs, default)


def check() -> None:
    """Raise ImproperlyConfigured when the file or overrides are bad (run at start-up)."""
    load()


def _read_file(path: str) -> dict:
    try:
        with open(os.path.expanduser(path), "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ImproperlyConfigured(f"LCM_CONFIG_FILE={path!r}: no such file") from None
    except OSError as error:
        raise ImproperlyConfigured(f"LCM_CONFIG_FILE={path!r}: cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise ImproperlyConfigured(f"{path}: not valid TOML: {error}") from None


def _engine(data: dict, where: str, source: str | None) -> EngineConfig:
    values: dict[str, Any] = {}
    for section, kind in _SECTION_TYPES.items():
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise ImproperlyConfigured(f"{where}: [{section}] must be a table")
        table = _without_retired_keys(section, table, where)
        known = {f.name: f for f in fields(kind)}
        for key in table:
            if key not in known:
                raise ImproperlyConfigured(
                    f"{where}: unknown key {section}.{key}; known: {', '.join(known)}"
                )
        defaults = kind()
        parsed = {}
        for key, value in table.items():
            expected = type(getattr(defaults, key))
            parsed[key] = _typed(value, expected, f"{where}: {section}.{key}")
            choices = _CHOICES.get((section, key))
            if choices and parsed[key] not in choices:
                raise ImproperlyConfigured(
                    f"{where}: {section}.{key}={value!r} must be one of {', '.join(choices)}"
                )
            if isinstance(parsed[key], int | float) and not isinstance(parsed[key], bool):
                floor = 1 if (section, key) in _POSITIVE else 0
                if parsed[key] < floor:
                    raise ImproperlyConfigured(
                        f"{where}: {section}.{key}={value!r} must be >= {floor}"
                    )
        values[section] = kind(**parsed)
    return EngineConfig(**values, source=source)


def _without_retired_keys(section: str, table: dict, where: str) -> dict:
    retired = [key for key in table if (section, key) in _RETIRED_KEYS]
    for key in retired:
        _warn_ignored(where, f"{section}.{key}", _RETIRED_KEYS[section, key])
    return {key: value for key, value in table.items() if key not in retired}


def _warn_retired_sections(data: dict, where: str) -> None:
    for section, why in _RETIRED_SECTIONS.items():
        if section in data:
            _warn_ignored(where, f"[{section}]", why)


def _warn_ignored(where: str, key: str, why: str) -> None:
    """One warning per file and key in a process, however often the file is read."""
    if (where, key) in _warned:
        return
    _warned.add((where, key))
    logger.warning("%s: %s is no longer read (%s); ignored, remove it", where, key, why)


def _typed(value: Any, expected: type, label: str) -> Any:
    # TOML booleans are not numbers here, and an int is a fine float.
    accepted = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}[expected]
    if isinstance(value, accepted) and (expected is bool or not isinstance(value, bool)):
        return float(value) if expected is float else value
    raise ImproperlyConfigured(f"{label}={value!r} is invalid: expected {expected.__name__}")


_MODEL_FIELDS = {
    "provider": str,
    "model_id": str,
    "context_limit": int,
    "max_output_tokens": int,
    "api_key_env": str,
    "base_url_env": str,
    "cache": str,
    "cache_ttl": str,
}


def _models(data: dict, env: Mapping[str, str], where: str) -> tuple[ModelSpec, ...]:
    table = data.get("models")
    if table is None:
        specs = {spec.name: spec for spec in BUILTIN_MODELS}
    else:
        if not isinstance(table, dict):
            raise ImproperlyConfigured(f"{where}: [models] must be a table of [models.<name>]")
        specs = {"offline": OFFLINE}
        for name, entry in table.items():
            label = f"{where}: models.{name}"
            if not isinstance(entry, dict):
                raise ImproperlyConfigured(f"{label} must be a table")
            specs[name] = _model_spec(name, entry, label)
    return tuple(_with_env_overrides(specs, env).values())


def _model_spec(name: str, entry: dict, label: str) -> ModelSpec:
    for key in entry:
        if key not in _MODEL_FIELDS:
            raise ImproperlyConfigured(
                f"{label}.{key} is not a model setting; known: {', '.join(_MODEL_FIELDS)}"
            )
    values = {
        key: _typed(value, _MODEL_FIELDS[key], f"{label}.{key}") for key, value in entry.items()
    }
    return _build_spec(name, values, label)


def _build_spec(name: str, values: dict, label: str) -> ModelSpec:
    provider = values.get("provider")
    if provider not in PROVIDERS:
        raise ImproperlyConfigured(
            f"{label}.provider={provider!r} must be one of {', '.join(PROVIDERS)}"
        )
    model_id = values.get("model_id") or ("offline" if provider == "offline" else "")
    if not model_id:
        raise ImproperlyConfigured(f"{label}.model_id is required")
    context_limit = values.get(
        "context_limit", OFFLINE.context_limit if provider == "offline" else 0
    )
    if context_limit < 1024:
        raise ImproperlyConfigured(f"{label}.context_limit={context_limit!r} must be >= 1024")
    max_output = values.get("max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS)
    if not 1 <= max_output < context_limit:
        raise ImproperlyConfigured(
            f"{label}.max_output_tokens={max_output!r} must be from 1 to context_limit - 1"
        )
    key_env = values.get("api_key_env", _DEFAULT_KEY_ENV.get(provider)) or None
    base_env = values.get("base_url_env", _DEFAULT_BASE_URL_ENV.get(provider)) or None
    if provider == "offline":
        key_env = base_env = None
    cache = values.get("cache", "auto")
    if cache not in CACHE_MODES:
        raise ImproperlyConfigured(
            f"{label}.cache={cache!r} must be one of {', '.join(CACHE_MODES)}"
        )
    ttl = values.get("cache_ttl", "5m")
    if ttl not in CACHE_TTLS:
        raise ImproperlyConfigured(
            f"{label}.cache_ttl={ttl!r} must be one of {', '.join(CACHE_TTLS)}"
        )
    return ModelSpec(
        name, provider, model_id, context_limit, max_output, key_env, base_env, cache, ttl
    )


def _env_name(model: str) -> str:
    return "LCM_MODEL_" + model.upper().replace("-", "_").replace(".", "_") + "_"


def _with_env_overrides(
    specs: dict[str, ModelSpec], env: Mapping[str, str]
) -> dict[str, ModelSpec]:
    names = set(specs)
    for variable in env:
        if variable.startswith("LCM_MODEL_") and variable.endswith("_MODEL_ID"):
            candidate = variable[len("LCM_MODEL_") : -len("_MODEL_ID")].lower()
            if candidate and not any(_env_name(n) == _env_name(candidate) for n in names):
                names.add(candidate)
    result: dict[str, ModelSpec] = {}
    for name in sorted(
        names, key=lambda n: (n not in specs, list(specs).index(n) if n in specs else 0, n)
    ):
        prefix = _env_name(name)
        overrides = {}
        for key, kind in _MODEL_FIELDS.items():
            raw = env.get(prefix + key.upper())
            if raw is None:
                continue
            if kind is int:
                try:
                    overrides[key] = int(raw)
                except ValueError:
                    raise ImproperlyConfigured(
                        f"{prefix + key.upper()}={raw!r} is invalid: expected int"
                    ) from None
            else:
                overrides[key] = raw.strip()
        if not overrides:
            result[name] = specs[name]
            continue
        base = specs.get(name)
        values = (
            {}
            if base is None
            else {
                key: getattr(base, key) for key in _MODEL_FIELDS if getattr(base, key) is not None
            }
        )
        values.update(overrides)
        result[name] = _build_spec(name, values, f"environment {prefix}*")
    if "offline" in result and result["offline"] != OFFLINE:
        result["offline"] = replace(
            OFFLINE,
            context_limit=result["offline"].context_limit,
            max_output_tokens=result["offline"].max_output_tokens,
        )
    return result


# The contract -------------------------------------------------------------------------------


def models() -> list[ModelSpec]:
    """Every configured model; `offline` is always among them."""
    return list(load().models)


def default_model() -> ModelSpec:
    """LCM_DEFAULT_MODEL, else `[general] default_model`, else the first model whose key is
    set, else `offline`."""
    loaded = load()
    by_name = {spec.name: spec for spec in loaded.models}
    if loaded.default_model:
        return by_name[loaded.default_model]
    for spec in loaded.models:
        if spec.provider != "offline" and api_key(spec) is not None:
            return spec
    return by_name["offline"]


def model_get(name: str) -> ModelSpec:
    """The model configured as `name`; raises UnknownModel listing the configured names."""
    specs = load().models
    for spec in specs:
        if spec.name == name:
            return spec
    raise UnknownModel(name, [spec.name for spec in specs])


def model_named(name: str) -> ModelSpec:
    """The model configured as `name`, else the one configured with `name` as its model id
    (an agent configured for "gpt-5.5" reaches the model that serves it); raises
    UnknownModel listing the configured names."""
    try:
        return model_get(name)
    except UnknownModel:
        matches = [spec for spec in load().models if spec.model_id == name]
        if len(matches) == 1:
            return matches[0]
        raise


def api_key(spec: ModelSpec) -> str | None:
    """The key from the environment, at call time; never stored, logged or returned in JSON."""
    if not spec.api_key_env:
        return None
    return os.environ.get(spec.api_key_env, "").strip() or None


def require_key(spec: ModelSpec) -> str:
    """The key, or MissingKey naming the variable (offline needs none: returns "")."""
    if spec.provider == "offline":
        return ""
    key = api_key(spec)
    if key is None:
        raise MissingKey(spec.name, spec.api_key_env or "(no api_key_env configured)")
    return key


def base_url(spec: ModelSpec) -> str | None:
    if not spec.base_url_env:
        return None
    return os.environ.get(spec.base_url_env, "").strip() or None


def engine_config() -> EngineConfig:
    """The [general] [budget] [stream] [tools] [openai] [anthropic] tables with their SRD 18
    defaults (SRD 18's [retrieval] and general.data_dir are read by nothing: a file that has
    them loads with a warning, see `_RETIRED_SECTIONS`)."""
    return load().engine
