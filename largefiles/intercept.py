"""Interception at ingest, before anything is stored: find file blocks (and whole tool
outputs) at or above the token threshold, explore them, and rewrite the message and its
parts to the compact reference.

This half runs before the ingest transaction, with no lock held, because a text file may
be explored by the summarizer model. It writes nothing: storing the bytes (before the
transaction) and the rows (inside it) is `largefiles.services`.

Cheap when there is nothing to do (the common case): a text is looked at only if it holds
`<file` or is long enough that it could reach the threshold.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from conversations.inputs import MessageInput, PartInput
from conversations.models import PartType, Role
from core.token_estimate import estimate
from largefiles.blocks import find_file_blocks, replace_blocks
from largefiles.explore import explore
from largefiles.models import LargeFile
from largefiles.reference import (
    format_file_reference,
    format_tool_output_reference,
    new_file_id,
)

# No estimator we ship counts more than 2 tokens per character (astral symbols), so a
# text shorter than threshold / 2 characters cannot reach the threshold.
_MAX_TOKENS_PER_CHAR = 2
_PART_TEXT_FIELDS = ("text_content", "tool_output", "tool_error")


@dataclass
class PendingFile:
    """A file to store (new) or to reuse (`existing`), keyed by its SHA-256."""

    file_id: str
    sha256: str
    data: bytes  # empty for an existing file
    byte_size: int
    file_name: str
    mime_type: str
    extension: str
    line_count: int
    token_count: int
    exploration_summary: str
    tool_name: str = ""
    existing: bool = False


@dataclass
class PreparedBatch:
    """The rewritten inputs, each message's file ids, and the files they refer to."""

    messages: list[MessageInput]
    file_ids: list[list[str]]
    files: dict[str, PendingFile] = field(default_factory=dict)  # by sha256
    # New id -> the id of the same bytes that a concurrent writer stored first.
    remapped: dict[str, str] = field(default_factory=dict)


def _could_hold_file(text: str | None, threshold: int) -> bool:
    return bool(text) and ("<file" in text or len(text) * _MAX_TOKENS_PER_CHAR >= threshold)


def needs_interception(messages: Sequence[MessageInput], threshold: int) -> bool:
    """The fast path of every append: plain loops, no allocation (runs per message)."""
    min_chars = -(-threshold // _MAX_TOKENS_PER_CHAR)  # ceil: shorter texts cannot qualify
    for item in messages:
        text = item.content
        if text and (len(text) >= min_chars or "<file" in text):
            return True
        for part in item.parts:
            columns = part.columns
            for name in _PART_TEXT_FIELDS:
                text = columns.get(name)
                if text and (len(text) >= min_chars or "<file" in text):
                    return True
    return False


class _Rewriter:
    """Rewrites the texts of one batch, collecting files by content hash."""

    def __init__(
        self,
        *,
        conversation_id: int,
        threshold: int,
        summarize_text: Callable[[str, int], str] | None,
    ):
        self.threshold = threshold
        self.summarize_text = summarize_text
        self.conversation_id = conversation_id
        self.files: dict[str, PendingFile] = {}
        # Whole texts replaced in a part -> their reference, to replace in the content too.
        self.whole: dict[str, str] = {}

    def _file(self, text: str, *, name: str | None, mime: str | None, tool: str) -> PendingFile:
        """The file for `text`: one lookup per distinct content in the batch."""
        data = text.encode("utf-8", errors="surrogatepass")
        sha = hashlib.sha256(data).hexdigest()
        if sha in self.files:
            return self.files[sha]
        row = LargeFile.objects.filter(conversation_id=self.conversation_id, sha256=sha).first()
        if row is not None:
            pending = PendingFile(
                file_id=row.id,
                sha256=sha,
                data=b"",
                byte_size=row.byte_size,
                file_name=row.file_name,
                mime_type=row.mime_type,
                extension="",
                line_count=row.line_count,
                token_count=row.token_count,
                exploration_summary=row.exploration_summary,
                tool_name=row.tool_name,
                existing=True,
            )
        else:
            found = explore(text, name=name, mime=mime, summarize_text=self.summarize_text)
            pending = PendingFile(
                file_id=new_file_id(),
                sha256=sha,
                data=data,
                byte_size=len(data),
                file_name=name or "",
                mime_type=found.mime_type,
                extension=found.extension,
                line_count=found.line_count,
                token_count=estimate(text),
                exploration_summary=found.summary,
                tool_name=tool,
            )
        self.files[sha] = pending
        return pending

    def _big(self, text: str) -> bool:
        return len(text) * _MAX_TOKENS_PER_CHAR >= self.threshold and (
            estimate(text) >= self.threshold
        )

    def rewrite(
        self,
        text: str,
        *,
        ids: list[str],
        tool_output: bool = False,
        tool_name: str = "",
        whole_file: tuple[str | None, str | None] | None = None,
    ) -> str:
        """`text` with large file blocks replaced by references, and then, for a tool
        output or the text of a `file` part (`whole_file` = its name and MIME type), the
        whole text too if it is still large. Appends the file ids to `ids`."""
        original = text
        if "<file" in text:
            replacements = {}
            for block in find_file_blocks(text):
                if not self._big(block.body):
                    continue
                pending = self._file(block.body, name=block.name, mime=block.mime, tool="")
                replacements[block.start] = format_file_reference(
                    file_id=pending.file_id,
                    name=block.name,
                    mime_type=pending.mime_type,
                    byte_size=pending.byte_size,
                    summary=pending.exploration_summary,
                )
                ids.append(pending.file_id)
            text = replace_blocks(text, replacements)
        if (tool_output or whole_file) and self._big(text):
            if whole_file is not None:
                name, mime = whole_file
                pending = self._file(text, name=name, mime=mime, tool="")
                reference = format_file_reference(
                    file_id=pending.file_id,
                    name=name,
                    mime_type=pending.mime_type,
                    byte_size=pending.byte_size,
                    summary=pending.exploration_summary,
                )
            else:
                pending = self._file(text, name=None, mime=None, tool=tool_name)
                reference = format_tool_output_reference(
                    file_id=pending.file_id,
                    tool_name=tool_name or None,
                    mime_type=pending.mime_type,
                    byte_size=pending.byte_size,
                    summary=pending.exploration_summary,
                )
            ids.append(pending.file_id)
            self.whole[original] = reference
            text = reference
        return text


def _tool_name(item: MessageInput) -> str:
    return next(
        (
            p.columns["tool_name"]
            for p in item.parts
            if p.part_type == PartType.TOOL and p.columns.get("tool_name")
        ),
        "",
    )


def _rewrite_message(item: MessageInput, rewriter: _Rewriter) -> tuple[MessageInput, list[str]]:
    ids: list[str] = []
    threshold = rewriter.threshold
    rewriter.whole = {}
    parts = []
    for part in item.parts:
        columns = dict(part.columns)
        for name in _PART_TEXT_FIELDS:
            value = columns.get(name)
            if not _could_hold_file(value, threshold):
                continue
            whole_file = None
            if part.part_type == PartType.FILE and name == "text_content":
                whole_file = (columns.get("file_name"), columns.get("file_mime"))
            columns[name] = rewriter.rewrite(
                value,
                ids=ids,
                tool_output=part.part_type == PartType.TOOL and name == "tool_output",
                tool_name=columns.get("tool_name") or "",
                whole_file=whole_file,
            )
        parts.append(replace(part, columns=columns) if columns != part.columns else part)
    content = item.content
    # A client often repeats a part's text in the content: the same text gets the same
    # reference there (and the same file, by hash).
    for original, reference in rewriter.whole.items():
        if original in content:
            content = content.replace(original, reference)
    if _could_hold_file(content, threshold):
        content = rewriter.rewrite(
            content, ids=ids, tool_output=item.role == Role.TOOL, tool_name=_tool_name(item)
        )
    rewritten = replace(item, content=content, parts=tuple(parts))
    return rewritten, list(dict.fromkeys(ids))


def prepare_batch(
    *,
    conversation_id: int,
    messages: Sequence[MessageInput],
    threshold: int,
    summarize_text: Callable[[str, int], str] | None = None,
) -> PreparedBatch | None:
    """None when no message holds anything to intercept (nothing was looked up)."""
    if not needs_interception(messages, threshold):
        return None
    rewriter = _Rewriter(
        conversation_id=conversation_id, threshold=threshold, summarize_text=summarize_text
    )
    rewritten, file_ids = [], []
    for item in messages:
        new_item, ids = _rewrite_message(item, rewriter)
        rewritten.append(new_item)
        file_ids.append(ids)
    if not rewriter.files:
        return None
    return PreparedBatch(messages=rewritten, file_ids=file_ids, files=rewriter.files)


def swap_file_ids(item: MessageInput, mapping: dict[str, str]) -> MessageInput:
    """`item` with file ids replaced per `mapping` (ids are all the same length, so the
    token count does not change)."""

    def swap(value):
        if isinstance(value, str):
            for old, new in mapping.items():
                value = value.replace(old, new)
        return value

    parts = tuple(
        PartInput(p.part_type, p.ordinal, {k: swap(v) for k, v in p.columns.items()})
        for p in item.parts
    )
    return replace(item, content=swap(item.content), parts=parts)
