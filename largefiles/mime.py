"""Decide what kind of file a block holds, its normalized MIME type and a safe storage extension.

Order of evidence: the declared MIME type when it is specific, then the extension of the file
name, then the content itself. The storage extension always comes from the fixed tables below,
never from the user's file name: a name only selects a row of `_EXTENSIONS`.
"""

from __future__ import annotations

import re

from .kinds import FileType, Kind
from .sniff import sniff

# Allowed storage extensions: extension -> (kind, language). Only these are ever returned.
_EXTENSIONS: dict[str, tuple[Kind, str | None]] = {
    ".json": (Kind.JSON, None),
    ".jsonl": (Kind.JSON, None),
    ".ndjson": (Kind.JSON, None),
    ".csv": (Kind.CSV, None),
    ".tsv": (Kind.TSV, None),
    ".yaml": (Kind.YAML, None),
    ".yml": (Kind.YAML, None),
    ".xml": (Kind.XML, None),
    ".xsd": (Kind.XML, None),
    ".xsl": (Kind.XML, None),
    ".svg": (Kind.XML, None),
    ".py": (Kind.CODE, "python"),
    ".pyi": (Kind.CODE, "python"),
    ".js": (Kind.CODE, "javascript"),
    ".mjs": (Kind.CODE, "javascript"),
    ".cjs": (Kind.CODE, "javascript"),
    ".jsx": (Kind.CODE, "javascript"),
    ".ts": (Kind.CODE, "typescript"),
    ".tsx": (Kind.CODE, "typescript"),
    ".mts": (Kind.CODE, "typescript"),
    ".cts": (Kind.CODE, "typescript"),
    ".go": (Kind.CODE, "go"),
    ".rs": (Kind.CODE, "rust"),
    ".java": (Kind.CODE, "java"),
    ".c": (Kind.CODE, "c"),
    ".h": (Kind.CODE, "c"),
    ".cc": (Kind.CODE, "cpp"),
    ".cpp": (Kind.CODE, "cpp"),
    ".cxx": (Kind.CODE, "cpp"),
    ".hh": (Kind.CODE, "cpp"),
    ".hpp": (Kind.CODE, "cpp"),
    ".hxx": (Kind.CODE, "cpp"),
    ".rb": (Kind.CODE, "ruby"),
    ".sh": (Kind.CODE, "shell"),
    ".bash": (Kind.CODE, "shell"),
    ".zsh": (Kind.CODE, "shell"),
    ".sql": (Kind.CODE, "sql"),
    ".md": (Kind.TEXT, None),
    ".markdown": (Kind.TEXT, None),
    ".txt": (Kind.TEXT, None),
    ".log": (Kind.TEXT, None),
    ".rst": (Kind.TEXT, None),
}

# The extension used when the name offers none of the kind's own.
_DEFAULT_EXTENSION: dict[tuple[Kind, str | None], str] = {
    (Kind.JSON, None): ".json",
    (Kind.CSV, None): ".csv",
    (Kind.TSV, None): ".tsv",
    (Kind.YAML, None): ".yaml",
    (Kind.XML, None): ".xml",
    (Kind.CODE, "python"): ".py",
    (Kind.CODE, "javascript"): ".js",
    (Kind.CODE, "typescript"): ".ts",
    (Kind.CODE, "go"): ".go",
    (Kind.CODE, "rust"): ".rs",
    (Kind.CODE, "java"): ".java",
    (Kind.CODE, "c"): ".c",
    (Kind.CODE, "cpp"): ".cpp",
    (Kind.CODE, "ruby"): ".rb",
    (Kind.CODE, "shell"): ".sh",
    (Kind.CODE, "sql"): ".sql",
    (Kind.TEXT, None): ".txt",
}

_DEFAULT_MIME: dict[tuple[Kind, str | None], str] = {
    (Kind.JSON, None): "application/json",
    (Kind.CSV, None): "text/csv",
    (Kind.TSV, None): "text/tab-separated-values",
    (Kind.YAML, None): "application/yaml",
    (Kind.XML, None): "application/xml",
    (Kind.CODE, "python"): "text/x-python",
    (Kind.CODE, "javascript"): "text/javascript",
    (Kind.CODE, "typescript"): "application/typescript",
    (Kind.CODE, "go"): "text/x-go",
    (Kind.CODE, "rust"): "text/x-rust",
    (Kind.CODE, "java"): "text/x-java",
    (Kind.CODE, "c"): "text/x-c",
    (Kind.CODE, "cpp"): "text/x-c++",
    (Kind.CODE, "ruby"): "text/x-ruby",
    (Kind.CODE, "shell"): "application/x-sh",
    (Kind.CODE, "sql"): "application/sql",
    (Kind.TEXT, None): "text/plain",
}

# Declared MIME types that decide the kind on their own.
_MIME_KINDS: dict[str, tuple[Kind, str | None]] = {
    "application/json": (Kind.JSON, None),
    "text/json": (Kind.JSON, None),
    "application/x-ndjson": (Kind.JSON, None),
    "application/jsonl": (Kind.JSON, None),
    "text/csv": (Kind.CSV, None),
    "application/csv": (Kind.CSV, None),
    "text/tab-separated-values": (Kind.TSV, None),
    "application/yaml": (Kind.YAML, None),
    "application/x-yaml": (Kind.YAML, None),
    "text/yaml": (Kind.YAML, None),
    "text/x-yaml": (Kind.YAML, None),
    "application/xml": (Kind.XML, None),
    "text/xml": (Kind.XML, None),
    "text/x-python": (Kind.CODE, "python"),
    "text/x-script.python": (Kind.CODE, "python"),
    "application/x-python": (Kind.CODE, "python"),
    "text/javascript": (Kind.CODE, "javascript"),
    "application/javascript": (Kind.CODE, "javascript"),
    "application/x-javascript": (Kind.CODE, "javascript"),
    "application/typescript": (Kind.CODE, "typescript"),
    "text/typescript": (Kind.CODE, "typescript"),
    "text/x-typescript": (Kind.CODE, "typescript"),
    "text/x-go": (Kind.CODE, "go"),
    "text/x-rust": (Kind.CODE, "rust"),
    "text/x-java": (Kind.CODE, "java"),
    "text/x-java-source": (Kind.CODE, "java"),
    "text/x-c": (Kind.CODE, "c"),
    "text/x-csrc": (Kind.CODE, "c"),
    "text/x-chdr": (Kind.CODE, "c"),
    "text/x-c++": (Kind.CODE, "cpp"),
    "text/x-c++src": (Kind.CODE, "cpp"),
    "text/x-c++hdr": (Kind.CODE, "cpp"),
    "text/x-ruby": (Kind.CODE, "ruby"),
    "application/x-ruby": (Kind.CODE, "ruby"),
    "application/x-sh": (Kind.CODE, "shell"),
    "text/x-sh": (Kind.CODE, "shell"),
    "text/x-shellscript": (Kind.CODE, "shell"),
    "application/x-shellscript": (Kind.CODE, "shell"),
    "application/sql": (Kind.CODE, "sql"),
    "text/x-sql": (Kind.CODE, "sql"),
    "text/markdown": (Kind.TEXT, None),
    "text/x-markdown": (Kind.TEXT, None),
}
# Declared types whose extracted text is prose whatever it looks like (documents).
_DOCUMENT_MIME = re.compile(
    r"^(application/(pdf|msword|rtf|epub\+zip|vnd\.openxmlformats-officedocument\..+"
    r"|vnd\.oasis\.opendocument\..+|vnd\.ms-.+)|text/(html|rtf|richtext))$"
)
# Declared types that say nothing about the content.
_GENERIC_MIME = frozenset({"text/plain", "application/octet-stream", "binary/octet-stream"})
_MIME_SHAPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")

_SNIFF_CHARS = 65536


def normalize_mime(mime: str | None) -> str | None:
    """Lower-case `type/subtype` without parameters, or None when absent or not MIME-shaped."""
    if not mime:
        return None
    value = mime.split(";", 1)[0].strip().lower()
    return value if _MIME_SHAPE.match(value) else None


def name_extension(name: str | None) -> str | None:
    """The lower-case extension of the name's last path segment if it is on the allow-list."""
    if not name:
        return None
    base = re.split(r"[/\\]", name)[-1].strip().lower()
    dot = base.rfind(".")
    if dot <= 0:
        return None
    extension = base[dot:]
    return extension if extension in _EXTENSIONS else None


def guess_file_type(content: str, *, name: str | None, mime: str | None) -> FileType:
    declared = normalize_mime(mime)
    extension = name_extension(name)
    kind_language = (
        _kind_from_mime(declared)
        or (_EXTENSIONS[extension] if extension else None)
        or sniff(content[:_SNIFF_CHARS])
    )
    if extension is None or _EXTENSIONS[extension] != kind_language:
        extension = _DEFAULT_EXTENSION[kind_language]
    if declared is None or declared in _GENERIC_MIME:
        declared = _DEFAULT_MIME[kind_language]
    kind, language = kind_language
    return FileType(kind=kind, language=language, mime_type=declared, extension=extension)


def _kind_from_mime(mime: str | None) -> tuple[Kind, str | None] | None:
    if mime is None:
        return None
    if mime in _MIME_KINDS:
        return _MIME_KINDS[mime]
    if mime.endswith("+json"):
        return (Kind.JSON, None)
    if mime.endswith("+xml") and mime != "application/xhtml+xml":
        return (Kind.XML, None)
    if _DOCUMENT_MIME.match(mime) or mime == "application/xhtml+xml":
        return (Kind.TEXT, None)
    return None
