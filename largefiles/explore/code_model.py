"""What a code outliner finds: imports, definitions with their signatures, other names."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Definition:
    line: int  # 1-based
    name: str
    signature: str  # the declaration without its body, on one line
    depth: int = 0  # 0 at the top level, 1 inside a class, impl, module...


@dataclass
class CodeOutline:
    imports: list[str] = field(default_factory=list)
    definitions: list[Definition] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # constants, variables, macros
    notes: list[str] = field(default_factory=list)  # docstring, package, parse fallback...
