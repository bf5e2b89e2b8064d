"""Identifiers of the turn engine: ULIDs as 26-character strings (sortable by creation)."""

from __future__ import annotations

import ulid


def new_id() -> str:
    return str(ulid.ULID())
