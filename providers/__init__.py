"""One provider layer for the whole product: model config, adapters (Anthropic Messages,
OpenAI Responses, offline), retries, redaction. See docs/providers.md."""
