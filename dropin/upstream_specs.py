"""The model a drop-in request names, as a `ModelSpec`: a configured model, or, on a wire
that passes requests through (dropin/wires/), a name the configuration does not list,
served by that wire's own upstream with the name unchanged."""

from __future__ import annotations

from django.conf import settings

from providers.config import ModelSpec, model_named
from providers.errors import UnknownModel


def spec_for(name: str, passthrough=None, *, max_tokens: int | None = None) -> ModelSpec:
    """Raises `UnknownModel` for an unlisted name on a wire without pass-through."""
    try:
        return model_named(name)  # by name, or by model id (an agent naming "gpt-5.5")
    except UnknownModel:
        if passthrough is None:
            raise
    limit = settings.LCM_DROPIN_UNLISTED_CONTEXT_LIMIT
    return ModelSpec(
        name=name,
        provider=passthrough.provider,
        model_id=name,
        context_limit=limit,
        max_output_tokens=min(max_tokens or 4096, limit // 2),
        api_key_env=passthrough.api_key_env,
        base_url_env=passthrough.base_url_env,
    )
