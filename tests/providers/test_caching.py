"""Prompt-cache policy (providers/caching.py): model settings, breakpoint placement, usage
fields, and the Anthropic adapter's marks."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from providers import blocks as B
from providers.anthropic import AnthropicProvider
from providers.base import ProviderRequest
from providers.caching import (
    LOOKBACK_BLOCKS,
    CachePlan,
    anthropic_breakpoints,
    anthropic_min_tokens,
    billed_input,
    block_tokens,
    read_cache_usage,
)
from providers.config import load, model_get

BIG = "Rule: cite the file and the ticket for every claim. " * 200  # ~2,000 tokens


def _text(n: int) -> tuple[str, dict]:
    return ("user", {"type": "text", "text": "x" * n})


def test_model_cache_settings_are_validated_and_overridable(tmp_path, monkeypatch):
    path = tmp_path / "c.toml"
    path.write_text(
        '[models.s]\nprovider = "anthropic"\nmodel_id = "claude-sonnet-5-5"\n'
        'context_limit = 200000\ncache = "off"\ncache_ttl = "1h"\n'
    )
    specs = {s.name: s for s in load({"LCM_CONFIG_FILE": str(path)}).models}
    assert (specs["s"].cache, specs["s"].cache_ttl) == ("off", "1h")
    assert (specs["offline"].cache, specs["offline"].cache_ttl) == ("auto", "5m")
    path.write_text(
        '[models.s]\nprovider = "anthropic"\nmodel_id = "m"\ncontext_limit = 200000\n'
        'cache = "sometimes"\n'
    )
    with pytest.raises(ImproperlyConfigured, match="cache='sometimes' must be one of auto, off"):
        load({"LCM_CONFIG_FILE": str(path)})
    with pytest.raises(ImproperlyConfigured, match="cache_ttl='2h' must be one of 5m, 1h"):
        load({"LCM_MODEL_SONNET_CACHE_TTL": "2h"})
    monkeypatch.setenv("LCM_MODEL_SONNET_CACHE_TTL", "1h")
    assert model_get("sonnet").cache_ttl == "1h"


def test_breakpoints_respect_the_minimum_and_keep_at_most_four():
    blocks = [_text(4000) for _ in range(8)]  # 1,000 tokens or so each
    per = block_tokens(blocks[0][1])
    chosen = anthropic_breakpoints(blocks, system_ends=[0, 1, 2, 3, 4], stable_end=6, minimum=1024)
    first_eligible = next(i for i in range(8) if per * (i + 1) >= 1024)
    assert chosen == [i for i in (0, 1, 2, 3, 4, 6) if i >= first_eligible][-4:]
    assert len(chosen) == 4 and chosen[-1] == 6
    assert anthropic_breakpoints(blocks, system_ends=[0], stable_end=None, minimum=10**6) == []
    assert anthropic_min_tokens("claude-haiku-4-5") == 4096
    assert anthropic_min_tokens("claude-sonnet-5-5") == 1024


def test_usage_fields_of_each_wire_api():
    assert read_cache_usage(
        "anthropic", {"cache_read_input_tokens": 900, "cache_creation_input_tokens": 40}
    ) == {"cache_read_input_tokens": 900, "cache_creation_input_tokens": 40}
    assert read_cache_usage("openai", {"input_tokens_details": {"cached_tokens": 1152}}) == {
        "cache_read_input_tokens": 1152,
        "cache_creation_input_tokens": None,
    }
    assert read_cache_usage("openai_chat", {"prompt_tokens_details": {"cached_tokens": 1280}}) == {
        "cache_read_input_tokens": 1280,
        "cache_creation_input_tokens": None,
    }
    assert read_cache_usage("openai", None) == {
        "cache_read_input_tokens": None,
        "cache_creation_input_tokens": None,
    }
    assert billed_input(uncached=100, read=1000, written=200) == 100 + 100 + 250
    assert billed_input(uncached=0, read=0, written=100, ttl="1h") == 200


def _request(spec, *, stable: int, messages: list[dict]) -> ProviderRequest:
    parts = (f"Instructions. {BIG}", f"Summaries. {BIG}")
    return ProviderRequest(
        model=spec,
        system="\n\n".join(parts),
        messages=messages,
        tools=[],
        max_output_tokens=100,
        cache=CachePlan(parts, stable, "k"),
    )


def test_the_adapter_marks_system_parts_and_the_last_stable_message():
    spec = model_get("sonnet")
    messages = [
        B.message("user", "first question"),
        B.message("assistant", "first answer"),
        B.message("user", "second question"),
    ]
    params = AnthropicProvider(spec).build_params(_request(spec, stable=2, messages=messages))
    assert [("cache_control" in b) for b in params["system"]] == [True, True]
    assert params["system"][0]["cache_control"] == {"type": "ephemeral"}
    marked = [
        (i, j)
        for i, m in enumerate(params["messages"])
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
    assert marked == [(1, 0)]  # the end of the previous exchange, not the new question
    assert (
        "\n\n".join(b["text"] for b in params["system"])
        == _request(spec, stable=2, messages=messages).system
    )
    # a tool loop's later step also marks the end of its own earlier steps
    loop = [
        *messages,
        B.message("assistant", [B.tool_use("toolu_1", "grep", {"q": "x"})]),
        B.message("user", [B.tool_result("toolu_1", "found")]),
    ]
    params = AnthropicProvider(spec).build_params(_request(spec, stable=2, messages=loop))
    marked = [
        i for i, m in enumerate(params["messages"]) for b in m["content"] if "cache_control" in b
    ]
    assert marked == [1, 3]


def test_spare_breakpoints_reach_back_past_the_providers_lookback():
    """A turn that added more than 20 blocks (a long tool loop) still reads the prefix the
    previous turn wrote: spare marks go back from the stable end in steps of 20 blocks,
    at most four in all, never below the minimum, never before a system mark."""
    blocks = [_text(4000) for _ in range(70)]
    chosen = anthropic_breakpoints(blocks, system_ends=[1], stable_end=65, minimum=1024)
    assert chosen == [1, 25, 45, 65]
    assert chosen[-1] - chosen[-2] == chosen[-2] - chosen[-3] == LOOKBACK_BLOCKS
    # a short request: nothing beyond the system and stable marks
    assert anthropic_breakpoints(blocks[:8], system_ends=[1], stable_end=6, minimum=1024) == [1, 6]
    # below the minimum the system part has no mark; it is the start of the stable prefix
    short = [("system", {"type": "text", "text": "Be brief."}), *blocks[:30]]
    chosen = anthropic_breakpoints(short, system_ends=[0], stable_end=29, minimum=1024)
    assert chosen == [9, 29] and 0 not in chosen


def test_summaries_in_parts_of_their_own_are_read_back_after_a_pass_adds_one():
    """Issue 35: each summary is a system part; only the instructions' end and the last
    summary's end are marked, and a request whose compaction pass appended a summary still
    reads the earlier summaries from the cache (the provider's lookback)."""
    from tests.support.fake_prompt_cache import AnthropicPromptCache

    spec = model_get("sonnet")
    summaries = [f"<summary {n}> {BIG}" for n in range(3)]
    cache = AnthropicPromptCache()

    def body(count: int) -> dict:
        parts = ("Be brief.", *summaries[:count])
        request = ProviderRequest(
            model=spec,
            system="\n\n".join(parts),
            messages=[B.message("user", f"question after {count} summaries")],
            tools=[],
            max_output_tokens=100,
            cache=CachePlan(parts, 0, "k", marked_parts=(0, len(parts) - 1)),
        )
        return AnthropicProvider(spec).build_params(request)

    first, second = body(2), body(3)
    assert [("cache_control" in b) for b in second["system"]] == [False, False, False, True]
    assert cache.usage(first)["cache_read_input_tokens"] == 0
    read = cache.usage(second)["cache_read_input_tokens"]
    assert read == sum(block_tokens(b) for b in first["system"])
