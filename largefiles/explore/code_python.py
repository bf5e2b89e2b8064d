"""Python outline from the syntax tree; the caller falls back to patterns when it won't parse."""

from __future__ import annotations

import ast
import warnings

from .budget import clip
from .code_model import CodeOutline, Definition

_SIGNATURE_CHARS = 160
_Function = ast.FunctionDef | ast.AsyncFunctionDef


def outline_python(content: str) -> CodeOutline | None:
    """The outline, or None when the source does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. SyntaxWarning for invalid escapes
            module = ast.parse(content)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    outline = CodeOutline()
    docstring = ast.get_docstring(module)
    if docstring:
        outline.notes.append(f"Docstring: {clip(docstring.split(chr(10) * 2)[0], 200)}")
    imports: dict[str, list[str]] = {}
    for statement in _top_level(module.body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                imports.setdefault(alias.name, [])
        elif isinstance(statement, ast.ImportFrom):
            source = "." * statement.level + (statement.module or "")
            names = imports.setdefault(source, [])
            names.extend(alias.name for alias in statement.names if alias.name not in names)
        elif isinstance(statement, _Function | ast.ClassDef):
            _add_definition(outline, statement, depth=0)
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            for name in _assigned_names(statement):
                if name not in outline.names:
                    outline.names.append(name)
        elif isinstance(statement, ast.If) and _is_main_guard(statement):
            outline.notes.append("Runs as a script (if __name__ == '__main__').")
    outline.imports = [
        f"{source} ({', '.join(names)})" if names else source for source, names in imports.items()
    ]
    return outline


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    # Statements at module level, including those under `if`/`try`/`with` (TYPE_CHECKING, etc.).
    found: list[ast.stmt] = []
    for statement in body:
        if isinstance(statement, ast.If) and _is_main_guard(statement):
            found.append(statement)
        elif isinstance(statement, ast.If | ast.With | ast.AsyncWith):
            found.extend(_top_level(statement.body))
            found.extend(_top_level(getattr(statement, "orelse", [])))
        elif isinstance(statement, ast.Try | ast.TryStar):
            for block in (statement.body, statement.orelse, statement.finalbody):
                found.extend(_top_level(block))
            for handler in statement.handlers:
                found.extend(_top_level(handler.body))
        else:
            found.append(statement)
    return found


def _add_definition(outline: CodeOutline, node: _Function | ast.ClassDef, *, depth: int) -> None:
    outline.definitions.append(
        Definition(line=node.lineno, name=node.name, signature=_signature(node), depth=depth)
    )
    if not isinstance(node, ast.ClassDef) or depth > 0:
        return
    attributes: list[str] = []
    first_attribute_line = 0
    for member in node.body:
        if isinstance(member, ast.Assign | ast.AnnAssign):
            first_attribute_line = first_attribute_line or member.lineno
            attributes.extend(name for name in _assigned_names(member) if name not in attributes)
    if attributes:
        signature = "attributes: " + clip(", ".join(attributes), _SIGNATURE_CHARS)
        outline.definitions.append(
            Definition(first_attribute_line, f"{node.name} attributes", signature, 1)
        )
    for member in node.body:
        if isinstance(member, _Function | ast.ClassDef):
            _add_definition(outline, member, depth=1)


def _signature(node: _Function | ast.ClassDef) -> str:
    decorators = "".join(f"@{clip(ast.unparse(d), 40)} " for d in node.decorator_list)
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(base) for base in node.bases]
        bases += [ast.unparse(keyword) for keyword in node.keywords]
        text = f"class {node.name}({', '.join(bases)})" if bases else f"class {node.name}"
    else:
        prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        returns = f" -> {ast.unparse(node.returns)}" if node.returns else ""
        text = f"{prefix} {node.name}({ast.unparse(node.args)}){returns}"
    return clip(decorators + text, _SIGNATURE_CHARS)


def _assigned_names(statement: ast.Assign | ast.AnnAssign | ast.AugAssign) -> list[str]:
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    names: list[str] = []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.append(node.id)
    return names


def _is_main_guard(statement: ast.If) -> bool:
    test = statement.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )
