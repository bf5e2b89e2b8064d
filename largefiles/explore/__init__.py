"""Exploration summaries: a compact, type-aware description of a large file.

`explore()` decides the file type (mime.py), runs the explorer for it, and falls back to the text
explorer, with a note, when structured content does not parse. Every summary is deterministic
(unless a `summarize_text` plug-in is given for text) and at most `MAX_TOKENS` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..mime import Kind, guess_file_type
from .budget import MAX_TOKENS, clip_to_tokens, with_excerpt
from .code import explore_code
from .jsondata import NotJson, explore_json
from .tabular import explore_table
from .text import SummarizeText, explore_text
from .xmldata import NotXml, explore_xml
from .yamldata import explore_yaml

__all__ = ["MAX_TOKENS", "Exploration", "SummarizeText", "count_lines", "explore", "explore_text"]


@dataclass(frozen=True)
class Exploration:
    kind: str  # json, csv, tsv, yaml, xml, code:<language>, text
    mime_type: str  # normalized: the declared type when specific, else the detected one
    extension: str  # for storage, with the dot, from the allow-list in mime.py
    summary: str
    line_count: int
    byte_size: int  # UTF-8 bytes of the content


def explore(
    content: str,
    *,
    name: str | None = None,
    mime: str | None = None,
    summarize_text: SummarizeText | None = None,
) -> Exploration:
    file_type = guess_file_type(content, name=name, mime=mime)
    summary = _summarize(content, file_type.kind, file_type.language, summarize_text)
    return Exploration(
        kind=file_type.label,
        mime_type=file_type.mime_type,
        extension=file_type.extension,
        summary=clip_to_tokens(summary, MAX_TOKENS),
        line_count=count_lines(content),
        byte_size=len(content.encode("utf-8", errors="surrogatepass")),
    )


def count_lines(content: str) -> int:
    """Lines as a reader counts them: a last line without a newline still counts."""
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)


def _summarize(
    content: str, kind: Kind, language: str | None, summarize_text: SummarizeText | None
) -> str:
    try:
        structured = _explore_structured(content, kind, language)
    except (NotJson, NotXml) as error:
        note = f"Note: could not read as {kind.upper()}: {error}; summarised as text."
        return explore_text(content, summarize_text=summarize_text, note=note)
    if structured is None:
        return explore_text(content, summarize_text=summarize_text)
    return with_excerpt(structured, content)


def _explore_structured(content: str, kind: Kind, language: str | None) -> str | None:
    """The summary from the explorer for `kind`; None for text."""
    if kind is Kind.JSON:
        return explore_json(content)
    if kind is Kind.XML:
        return explore_xml(content)
    if kind is Kind.CSV:
        return explore_table(content, delimiter=",")
    if kind is Kind.TSV:
        return explore_table(content, delimiter="\t")
    if kind is Kind.YAML:
        return explore_yaml(content)
    if kind is Kind.CODE and language is not None:
        return explore_code(content, language)
    return None
