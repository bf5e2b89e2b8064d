"""Line-pattern outlines for languages read without a parser.

Each line is cut to `_LINE_CHARS` before matching, so every pattern costs a bounded amount per
line. A definition is a line matching one of the language's definition patterns at indentation
up to `max_indent`; unindented ones are top level, indented ones are members (methods in a
class, functions in an impl). Signatures spanning lines are joined until their parentheses
balance (at most `_SIGNATURE_LINES` lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .budget import clip
from .code_model import CodeOutline, Definition

_LINE_CHARS = 300
_SIGNATURE_CHARS = 160
_SIGNATURE_LINES = 6
_CONTROL = frozenset(
    [
        "if",
        "else",
        "elif",
        "for",
        "foreach",
        "while",
        "do",
        "switch",
        "case",
        "catch",
        "return",
        "new",
        "throw",
        "try",
        "finally",
        "synchronized",
        "with",
        "match",
        "loop",
        "when",
        "unless",
        "until",
    ]
)


@dataclass(frozen=True)
class Language:
    imports: tuple[re.Pattern[str], ...]  # group 1 is what is imported
    definitions: tuple[re.Pattern[str], ...]  # group "name"
    names: tuple[re.Pattern[str], ...] = ()  # constants, variables, macros: group "name"
    notes: tuple[re.Pattern[str], ...] = ()  # whole line kept as a note (package, ...)
    block_imports: re.Pattern[str] | None = None  # group 1 holds several quoted imports
    max_indent: int = 4
    indent_unit: int = 4  # spaces per nesting level, for the depth shown


def _p(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


_JS_IMPORTS = (
    _p(r"""^\s*import\s+(?:type\s+)?(?:[^'"]*?\s+from\s+)?["']([^"']+)["']"""),
    _p(r"""^\s*\}\s*from\s+["']([^"']+)["']"""),
    _p(r"""^\s*export\s+(?:\*|\{[^}]*\})\s+from\s+["']([^"']+)["']"""),
    _p(r"""\brequire\(\s*["']([^"']+)["']\s*\)"""),
)
_JS_DEFINITIONS = (
    _p(r"^(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*(?P<name>[\w$]+)"),
    _p(r"^\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?class\s+(?P<name>[\w$]+)"),
    _p(
        r"^(?:export\s+)?(?:const|let|var)\s+(?P<name>[\w$]+)\s*(?::[^=]{0,80})?=\s*"
        r"(?:async\s+)?(?:function\b|\([^)]*\)\s*(?::[^=]{0,80})?=>|[\w$]+\s*=>)"
    ),
    _p(
        r"^\s*(?:export\s+)?(?:declare\s+)?(?:const\s+)?"
        r"(?:interface|type|enum|namespace)\s+(?P<name>[\w$]+)"
    ),
    _p(
        r"^\s{2,4}(?:(?:public|private|protected|static|async|readonly|abstract|override|get|set)\s+)*"
        r"(?P<name>#?[\w$]+)\s*(?:<[^>]{0,80}>)?\s*\([^)]*\)\s*(?::\s*[^{]{1,80})?\{\s*$"
    ),
)
_JAVASCRIPT = Language(imports=_JS_IMPORTS, definitions=_JS_DEFINITIONS)

_GO = Language(
    imports=(_p(r"""^import\s+(?:[\w.]+\s+)?"([^"]+)\""""),),
    block_imports=_p(r"^import\s*\(\s*$(.*?)^\)", re.MULTILINE | re.DOTALL),
    definitions=(
        _p(r"^func\s+(?:\([^)]*\)\s*)?(?P<name>\w+)"),
        _p(r"^type\s+(?P<name>\w+)"),
    ),
    names=(_p(r"^(?:var|const)\s+(?P<name>\w+)"),),
    notes=(_p(r"^package\s+\w+"),),
    max_indent=0,
)

_RUST = Language(
    imports=(_p(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+)"), _p(r"^extern\s+crate\s+(\w+)")),
    definitions=(
        _p(
            r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
            r"(?:extern\s+\"[^\"]*\"\s+)?fn\s+(?P<name>\w+)"
        ),
        _p(r"^(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum|trait|type|union|mod)\s+(?P<name>\w+)"),
        _p(r"^(?:unsafe\s+)?impl\b(?:<[^>]{0,80}>)?\s*(?P<name>[^{]{1,120}?)\s*(?:\{|where\b|$)"),
        _p(r"^macro_rules!\s*(?P<name>\w+)"),
    ),
    names=(_p(r"^(?:pub(?:\([^)]*\))?\s+)?(?:const|static)\s+(?:mut\s+)?(?P<name>\w+)\s*:"),),
)

_JAVA_MODIFIERS = r"(?:public|protected|private|static|final|abstract|synchronized|native|default|strictfp|sealed|non-sealed)"
_JAVA = Language(
    imports=(_p(r"^import\s+(?:static\s+)?([\w.*]+)\s*;"),),
    definitions=(
        _p(
            rf"^\s*(?:@\w+\s+)*(?:{_JAVA_MODIFIERS}\s+)*(?:class|interface|enum|record|@interface)\s+(?P<name>\w+)"
        ),
        _p(
            rf"^\s{{2,8}}(?:{_JAVA_MODIFIERS}\s+)+(?:<[^>]{{0,80}}>\s+)?[^=;(]{{0,120}}?\b(?P<name>\w+)\s*\("
        ),
    ),
    notes=(_p(r"^package\s+[\w.]+"),),
    max_indent=8,
)

_C = Language(
    imports=(_p(r"^\s*#\s*include\s*([<\"][^>\"]+[>\"])"),),
    definitions=(
        _p(
            r"^(?:typedef\s+)?(?:struct|union|enum|class)\s+(?P<name>\w+)\s*(?:final\s*)?(?::[^{;]*)?\{?\s*$"
        ),
        _p(r"^namespace\s+(?P<name>[\w:]+)"),
        _p(r"^typedef\s+[^;(]{1,120}?\b(?P<name>\w+)\s*;"),
        _p(
            r"^(?!(?:return|else|typedef|using|namespace|template)\b)"
            r"[A-Za-z_][\w:<>,]*(?:[ \t*&]+[A-Za-z_][\w:<>,]*){0,6}[ \t*&]+\**"
            r"(?P<name>~?[A-Za-z_][\w:]*)\s*\([^;]*(?:\)\s*(?:const\s*)?(?:;|\{)?\s*)?$"
        ),
    ),
    names=(_p(r"^\s*#\s*define\s+(?P<name>\w+)"),),
    max_indent=0,
)

_RUBY = Language(
    imports=(_p(r"""^\s*(?:require|require_relative|load)\s*\(?\s*["']([^"']+)["']"""),),
    definitions=(
        _p(r"^\s*(?:class|module)\s+(?P<name>[\w:]+)"),
        _p(r"^\s*def\s+(?P<name>(?:self\.)?[\w?!=\[\]<>+\-*/%]+)"),
    ),
    names=(_p(r"^\s*(?P<name>[A-Z][A-Z0-9_]*)\s*="),),
    max_indent=8,
    indent_unit=2,
)

_SHELL = Language(
    imports=(_p(r"^\s*(?:source|\.)\s+(\S+)"),),
    definitions=(
        _p(r"^\s*function\s+(?P<name>[\w:.-]+)"),
        _p(r"^\s*(?P<name>[\w:.-]+)\s*\(\s*\)"),
    ),
    names=(_p(r"^(?:export\s+|readonly\s+|declare\s+(?:-\w+\s+)?)?(?P<name>[A-Z][A-Z0-9_]*)="),),
)

_PYTHON = Language(
    imports=(_p(r"^\s*import\s+([\w., ]+)"), _p(r"^\s*from\s+([\w.]+\s+import\s+.+)")),
    definitions=(_p(r"^\s*(?:@\S+\s+)*(?:async\s+def|def|class)\s+(?P<name>\w+)"),),
    names=(_p(r"^(?P<name>[A-Za-z_]\w*)\s*(?::[^=]{0,80})?=(?!=)"),),
)

LANGUAGES: dict[str, Language] = {
    "javascript": _JAVASCRIPT,
    "typescript": _JAVASCRIPT,
    "go": _GO,
    "rust": _RUST,
    "java": _JAVA,
    "c": _C,
    "cpp": _C,
    "ruby": _RUBY,
    "shell": _SHELL,
    "python": _PYTHON,
}


def outline_by_patterns(content: str, language: str) -> CodeOutline:
    spec = LANGUAGES[language]
    outline = CodeOutline()
    lines = content.splitlines()
    if spec.block_imports is not None:
        for block in spec.block_imports.finditer(content):
            for item in re.findall(r'"([^"]+)"', block.group(1)):
                _add_unique(outline.imports, item)
    for index, raw in enumerate(lines):
        line = raw[:_LINE_CHARS].expandtabs(4)
        stripped = line.strip()
        if not stripped or stripped.startswith(("//", "/*", "*", "--")):
            continue
        if _collect(spec.imports, line, outline.imports, group=1):
            continue
        if any(note.match(line) for note in spec.notes):
            _add_unique(outline.notes, clip(stripped, 120))
            continue
        indent = len(line) - len(line.lstrip())
        definition = _definition(spec, line, indent)
        if definition is not None:
            signature = _signature(lines, index)
            outline.definitions.append(
                Definition(
                    index + 1, definition, signature, depth=min(3, -(-indent // spec.indent_unit))
                )
            )
            continue
        _collect(spec.names, line, outline.names, group="name")
    return outline


def _collect(
    patterns: tuple[re.Pattern[str], ...], line: str, into: list[str], *, group: int | str
) -> bool:
    for pattern in patterns:
        match = pattern.search(line) if pattern.pattern.startswith("\\b") else pattern.match(line)
        if match:
            _add_unique(into, clip(match.group(group).strip().rstrip("{").strip(), 120))
            return True
    return False


def _definition(spec: Language, line: str, indent: int) -> str | None:
    if indent > spec.max_indent:
        return None
    for pattern in spec.definitions:
        match = pattern.match(line)
        if match and match.group("name") not in _CONTROL:
            return clip(match.group("name"), 80)
    return None


def _signature(lines: list[str], index: int) -> str:
    parts = [lines[index][:_LINE_CHARS].strip()]
    depth = parts[0].count("(") - parts[0].count(")")
    following = index + 1
    while depth > 0 and following < min(len(lines), index + _SIGNATURE_LINES):
        part = lines[following][:_LINE_CHARS].strip()
        parts.append(part)
        depth += part.count("(") - part.count(")")
        following += 1
    text = " ".join(parts)
    for end in (" {", "{"):
        if text.endswith(end):
            text = text[: -len(end)]
    return clip(text.rstrip().rstrip(":").rstrip(), _SIGNATURE_CHARS)


def _add_unique(items: list[str], item: str) -> None:
    if item and item not in items:
        items.append(item)
