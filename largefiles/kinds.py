"""The kinds of file the explorers know, and what is decided about a file's type."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    JSON = "json"
    CSV = "csv"
    TSV = "tsv"
    YAML = "yaml"
    XML = "xml"
    CODE = "code"
    TEXT = "text"


@dataclass(frozen=True)
class FileType:
    kind: Kind
    language: str | None  # set for Kind.CODE: python, javascript, typescript, go, rust, ...
    mime_type: str
    extension: str  # with the leading dot, from the allow-list

    @property
    def label(self) -> str:
        """`json`, `csv`, ..., `code:python`, `text`."""
        return f"code:{self.language}" if self.kind is Kind.CODE else str(self.kind)
