"""Large-file interception, the pure half: find file blocks, explore them, format references.

Nothing here touches the database or Django settings; the storage and ingest half builds on it.
See docs/large-files.md.
"""

from .blocks import FileBlock, find_file_blocks, replace_blocks
from .explore import Exploration, SummarizeText, explore
from .kinds import FileType, Kind
from .mime import guess_file_type, normalize_mime
from .reference import (
    find_file_ids,
    format_file_reference,
    format_tool_output_reference,
    new_file_id,
)

__all__ = [
    "Exploration",
    "FileBlock",
    "FileType",
    "Kind",
    "SummarizeText",
    "explore",
    "find_file_blocks",
    "find_file_ids",
    "format_file_reference",
    "format_tool_output_reference",
    "guess_file_type",
    "new_file_id",
    "normalize_mime",
    "replace_blocks",
]
