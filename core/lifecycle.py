"""Server start and stop hooks, so the serving command (a ground-layer command) can run
upper layers' work without importing them: the turn engine registers its reconciler to
run at start and its runner shutdown to run at stop (turns/apps.py).

Hooks run in registration order; a failing start hook is logged and the server still
starts (the periodic reconciler of the worker catches up), a stop hook gets the seconds
left of the shutdown budget.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

_start_hooks: list[Callable[[], object]] = []
_stop_hooks: list[Callable[[float], object]] = []


def on_server_start(hook: Callable[[], object]) -> None:
    if hook not in _start_hooks:
        _start_hooks.append(hook)


def on_server_stop(hook: Callable[[float], object]) -> None:
    if hook not in _stop_hooks:
        _stop_hooks.append(hook)


def server_started() -> None:
    for hook in _start_hooks:
        try:
            hook()
        except Exception:
            logger.exception("server start hook %s failed", getattr(hook, "__name__", hook))


def server_stopping(timeout: float) -> None:
    for hook in _stop_hooks:
        try:
            hook(timeout)
        except Exception:
            logger.exception("server stop hook %s failed", getattr(hook, "__name__", hook))
