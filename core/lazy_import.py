"""Modules imported on first use.

The provider SDKs take most of a process's start-up to import (the `anthropic` package alone
was 60% of `manage.py check`'s import time), and most processes (commands, workers that never
call a model, every test subprocess) never touch them. `lazy_import` returns the module at
once and runs its code when an attribute is first read (the standard library's LazyLoader).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_import(name: str) -> ModuleType:
    """`name`'s module, loaded when first used; the loaded module if it already is."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
