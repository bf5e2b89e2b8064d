"""Errors of the provider layer.

A `ProviderError` is raised only BEFORE the first byte of a response (bad key, bad request,
rate limit or overload after the retries, no connection). Once a stream has started, a
failure ends it with a `Finished` event whose outcome says what happened instead.
Messages never contain an API key: they are built from the provider's error type and
message, which we pass through `redaction.redact_secrets` as well.
"""

from __future__ import annotations


class ProviderError(Exception):
    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after
        self.provider = provider

    def __str__(self) -> str:
        status = f"HTTP {self.status} " if self.status else ""
        return f"{status}{self.code}: {self.message}"

    def as_dict(self) -> dict:
        return {
            "code": self.code,
            "message": self.message,
            "status": self.status,
            "retry_after": self.retry_after,
            "provider": self.provider,
        }


class ProviderAuthError(ProviderError):
    """The provider refused the credentials (401/403): never retried."""


class ProviderUnavailable(ProviderError):
    """No answer: rate limited or overloaded after every retry, 5xx, timeout, no connection,
    the circuit breaker open, or the spend guard exhausted."""


class ToolOrderingError(ValueError):
    """A transcript that breaks a provider's tool ordering rules (each tool_result must
    answer a tool_use of the message right before it, and come first in its message)."""


class ModelConfigError(Exception):
    """A request names a model that cannot be used (4xx-mappable; see the subclasses)."""

    code = "model_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownModel(ModelConfigError):
    code = "unknown_model"

    def __init__(self, name: str, configured: list[str]) -> None:
        super().__init__(f"unknown model {name!r}; configured models: {', '.join(configured)}")
        self.name = name
        self.configured = list(configured)


class MissingKey(ModelConfigError):
    code = "missing_api_key"

    def __init__(self, model: str, variable: str) -> None:
        super().__init__(
            f"model {model!r} needs an API key: set the environment variable {variable}"
        )
        self.model = model
        self.variable = variable
