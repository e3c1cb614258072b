"""Symbols of a source file from its syntax tree: definitions and references (issue 36).

A definition is what a tag query (services/code/symbol_languages.py) captures: its name, kind, the
line span of the definition node, the enclosing definition (`parent`), a qualified name (a Go or Java
package, then the enclosing definitions: `Path.read_text`, `sync.Mutex.Lock`; a Python module comes
from the file's path when the table is read, `path_qualifier`, so a rename needs no rewrite), the
signature (the text up to the body) and the start of the docstring (a Python docstring, else the
comments right above). A reference is every other identifier as written, by line: calls, attribute
access, imports, types.

Outside bytes are parsed under the "code-symbols" budget (services/core/budgets.py): a file over its
input size is not parsed, a parse over its time is abandoned, and at most `structure` symbols are kept
per file (definitions first); `Symbols.capped` says which limit stopped it, so a reader can say so.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import PurePosixPath
from typing import Any, cast

from services.chunking.trees import parse
from services.code.qualified import qualified_references
from services.code.symbol_languages import CONTAINERS, LANGUAGES, SymbolLanguage
from services.core.budgets import budget

logger = logging.getLogger(__name__)

BUDGET = budget("code-symbols")
SIGNATURE_CHARS = 300
DOC_CHARS = 300
SLICE_BYTES = 64 * 1024  # references are captured a slice at a time, so a cap stops early


@dataclass(frozen=True)
class Definition:
    name: str
    kind: str
    qualified_name: str
    parent: str | None  # the qualified name of the enclosing definition
    line_start: int  # 1-based, inclusive
    line_end: int
    signature: str
    doc: str


@dataclass
class Symbols:
    language: str
    definitions: list[Definition] = field(default_factory=list)
    references: dict[str, list[int]] = field(default_factory=dict)  # name -> sorted distinct lines
    #: (name, qualifier) -> sorted distinct lines: Python uses resolved through imports (services/code/qualified.py)
    qualified: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    capped: str | None = None  # what stopped the extraction early, when something did


def supports(language: object) -> bool:
    return language in LANGUAGES


@cache
def _queries(language: str) -> tuple[Any, Any]:
    """The compiled (definitions, references) queries of a language."""
    from tree_sitter import Query
    from tree_sitter_language_pack import get_language

    spec = LANGUAGES[language]
    grammar = get_language(cast("Any", spec.grammar))
    references = " ".join(f"({node})" for node in spec.references)
    return Query(grammar, spec.definitions), Query(grammar, f"[{references}] @ref")


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


@lru_cache(maxsize=8192)  # every definition of a common name asks, and paths repeat
def path_qualifier(language: str | None, path: str | None) -> str:
    """The qualifier a file's path gives its names: a Python module (`Lib/pathlib/__init__.py` ->
    `Lib.pathlib`), else "". Applied when the table is read, so a renamed file's names follow it."""
    if language is None or language not in LANGUAGES or LANGUAGES[language].module != "python" or not path:
        return ""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p.isidentifier())


def module_qualifier(language: str, root: Any) -> str:
    """The qualifier a file's text gives its names: a Go or Java package, else "" (a Python module
    comes from the path: `path_qualifier`)."""
    kind = LANGUAGES[language].module
    if kind in ("go", "java"):
        clause = "package_clause" if kind == "go" else "package_declaration"
        for child in root.named_children[:8]:
            if child.type == clause:
                names = [n for n in child.named_children if n.type != "annotation"]
                return _text(names[0]) if names else ""
    return ""


def extract(content: str, language: str, path: str | None = None) -> Symbols:
    """The definitions and references of one file (empty Symbols for a language without queries)."""
    out = Symbols(language)
    if language not in LANGUAGES:
        return out
    source = content.encode("utf-8", "surrogatepass")
    if len(source) > BUDGET.input_limit():
        out.capped = f"not parsed: {len(source):,} bytes, over {BUDGET.input_limit():,}"
        return out
    started = time.monotonic()
    try:  # linear in the input, which the budget's input size bounds (~1 s for 4 MB)
        tree = parse(LANGUAGES[language].grammar, source)  # the chunker's tree of these bytes, when it has one
    except Exception as exc:  # a grammar that fails: the file keeps its chunks and lines, without symbols
        logger.warning("tree-sitter could not parse %s (%s): no symbols", path or language, exc)
        out.capped = "not parsed"
        return out
    deadline = started + BUDGET.seconds
    found, out.capped = _captured(tree.root_node, language, deadline)
    out.definitions, name_starts = _definitions(tree.root_node, found, language, deadline)
    if len(out.definitions) < len([f for f in found if f.kind != "scope"]):
        out.capped = out.capped or f"stopped after {BUDGET.seconds:g} s"
    if out.capped:
        return out
    room = BUDGET.structure - len(out.definitions)
    out.references, over = _references(tree.root_node, language, name_starts, room, len(source), deadline)
    if over:
        out.capped = over
    elif LANGUAGES[language].module == "python":
        own = {d.name for d in out.definitions if d.parent is None}
        out.qualified, late = qualified_references(tree.root_node, name_starts, own, deadline)
        out.capped = f"stopped after {BUDGET.seconds:g} s" if late else None
    return out


@dataclass
class _Found:
    node: Any
    name_node: Any
    name: str
    kind: str  # a definition kind, or "scope"
    parent: _Found | None = None
    qualified: str = ""


def _captured(root: Any, language: str, deadline: float) -> tuple[list[_Found], str | None]:
    """Every definition and scope the query finds, one per name node (the first pattern wins), in
    order; a top-level node at a time, stopping at the budget's count or time (and saying which)."""
    from tree_sitter import QueryCursor

    query, _ = _queries(language)
    seen: dict[int, tuple[int, _Found]] = {}
    capped = None
    for top in root.children or [root]:
        if len(seen) >= BUDGET.structure:
            capped = f"more than {BUDGET.structure:,} symbols"
        elif time.monotonic() > deadline:
            capped = f"stopped after {BUDGET.seconds:g} s"
        if capped:
            break
        for pattern, captures in QueryCursor(query).matches(top):
            _keep(pattern, captures, language, seen)
    found = sorted((found for _, found in seen.values()), key=lambda f: (f.node.start_byte, -f.node.end_byte))
    return found[: BUDGET.structure], capped


def _keep(pattern: int, captures: dict[str, list[Any]], language: str, seen: dict[int, tuple[int, _Found]]) -> None:
    names = captures.get("name")
    kind, nodes = next(((k, v) for k, v in captures.items() if k != "name"), ("", []))
    if not names or not nodes:
        return
    kind = "scope" if kind == "scope" else kind.removeprefix("definition.")
    name = _short_name(_text(names[0]))
    if not name or (kind == "constant" and (not _constant_name(name, language) or _in_function(nodes[0]))):
        return
    key = names[0].start_byte
    if key not in seen or pattern < seen[key][0]:
        seen[key] = (pattern, _Found(nodes[0], names[0], name, kind))


def _in_function(node: Any) -> bool:
    """Whether a node sits in a function's body (an assignment there is a local, not a constant)."""
    current = node.parent
    while current is not None:
        kind = current.type
        if "function" in kind or "method" in kind or "lambda" in kind or "closure" in kind or "constructor" in kind:
            return True
        current = current.parent
    return False


def _short_name(text: str) -> str:
    """The last part of a written name: `Foo<T>` -> Foo, `a::b::C` -> C, `Foo::Bar` -> Bar."""
    text = text.split("<", 1)[0].strip()
    for separator in ("::", "."):
        text = text.rsplit(separator, 1)[-1]
    return text.lstrip("&*").strip()


def _constant_name(name: str, language: str) -> bool:
    """Assignments count as constants when their name says so (UPPER_CASE); a `const` always does."""
    if language in ("go", "rust", "c", "cpp", "ruby"):
        return True
    letters = [c for c in name if c.isalpha()]
    return bool(letters) and name.upper() == name


def _definitions(root: Any, found: list[_Found], language: str, deadline: float) -> tuple[list[Definition], set[int]]:
    """The file's definitions in file order (those made before the deadline), and where their names
    end (a C++ `net::Socket::close` names `close`; `net` and `Socket` in it are references)."""
    spec = LANGUAGES[language]
    qualifier = module_qualifier(language, root)
    stack: list[_Found] = []
    out: list[Definition] = []
    for index, item in enumerate(found):
        if index % 1024 == 1023 and time.monotonic() > deadline:
            break
        while stack and stack[-1].node.end_byte <= item.node.start_byte:
            stack.pop()
        item.parent = stack[-1] if stack else None
        parts = _qualifiers(item, spec)
        item.qualified = spec.separator.join(p for p in (qualifier, *parts, item.name) if p)
        stack.append(item)
        if item.kind == "scope":
            continue
        receiver = _go_receiver(item.node) if language == "go" else None
        if receiver:
            parts = [receiver]
            item.qualified = spec.separator.join(p for p in (qualifier, receiver, item.name) if p)
        kind = item.kind
        if kind in ("function", "method"):
            holder = item.parent.kind if item.parent is not None else None
            kind = "method" if holder in CONTAINERS or receiver else "function"
        out.append(
            Definition(
                name=item.name,
                kind=kind,
                qualified_name=item.qualified,
                parent=spec.separator.join(p for p in (qualifier, *parts) if p) if parts else None,
                line_start=item.node.start_point[0] + 1,
                line_end=_last_line(item.node),
                signature=_signature(item.node),
                doc=_doc(item.node, language),
            )
        )
    return out, {f.name_node.end_byte for f in found if f.kind != "scope"}


def _qualifiers(item: _Found, spec: SymbolLanguage) -> list[str]:
    """The names of the enclosing definitions, outermost first (a C++ `Foo::bar` adds Foo)."""
    parts: list[str] = []
    parent = item.parent
    while parent is not None:
        parts.insert(0, parent.name)
        parent = parent.parent
    written = _text(item.name_node)
    if "::" in written and item.kind != "scope":
        parts += [p for p in written.split("<", 1)[0].split("::")[:-1] if p]
    return parts


def _last_line(node: Any) -> int:
    """The 1-based line of the node's last character (its end point is just past it)."""
    row, column = node.end_point
    return max(row if column == 0 and row > node.start_point[0] else row + 1, node.start_point[0] + 1)


def _go_receiver(node: Any) -> str | None:
    receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
    if receiver is None:
        return None
    stack = [receiver]
    while stack:
        current = stack.pop()
        if current.type == "type_identifier":
            return _text(current)
        stack.extend(reversed(current.named_children))
    return None


def _signature(node: Any) -> str:
    """The definition's text up to its body (its first line when it has no body), on one line."""
    body = node.child_by_field_name("body")
    if body is not None and body.start_byte > node.start_byte:
        text = node.text[: body.start_byte - node.start_byte].decode("utf-8", "replace")
    else:
        text = _text(node).split("\n", 1)[0]
    text = " ".join(text.split()).rstrip(":{ ").rstrip()
    return text[:SIGNATURE_CHARS]


def _doc(node: Any, language: str) -> str:
    """The start of the definition's docstring (Python) or of the comments right above it."""
    if language == "python":
        body = node.child_by_field_name("body")
        first = body.named_children[0] if body is not None and body.named_children else None
        if first is not None and first.type == "expression_statement" and first.named_children:
            first = first.named_children[0]
        if first is not None and first.type == "string":
            string = first
            if string.named_children:
                content = "".join(_text(c) for c in string.named_children if c.type == "string_content")
                return _first_paragraph(content)
        return ""
    while node.prev_named_sibling is None and node.parent is not None and node.parent.parent is not None:
        node = node.parent  # a wrapper on the same line (Go's `type`, an export): its comments
    comments: list[str] = []
    current = node.prev_named_sibling
    bottom = node.start_point[0]
    while current is not None and "comment" in current.type and current.end_point[0] >= bottom - 1:
        comments.insert(0, _text(current))
        bottom = current.start_point[0]
        current = current.prev_named_sibling
    cleaned = [line.strip().lstrip("/*#!").rstrip("*/").strip() for text in comments for line in text.splitlines()]
    return _first_paragraph("\n".join(cleaned))


def _first_paragraph(text: str) -> str:
    paragraph = text.strip().split("\n\n", 1)[0]
    return " ".join(paragraph.split())[:DOC_CHARS]


def _references(
    root: Any, language: str, definition_names: set[int], room: int, size: int, deadline: float
) -> tuple[dict[str, list[int]], str | None]:
    """name -> sorted distinct lines of each identifier that names no definition; a slice of the file
    at a time, so a file over `room` symbols or past the deadline stops early (and says which)."""
    from tree_sitter import QueryCursor

    _, query = _queries(language)
    found: dict[str, set[int]] = {}
    kept = 0
    for start in range(0, max(size, 1), SLICE_BYTES):
        if time.monotonic() > deadline:
            return _sorted(found), f"stopped after {BUDGET.seconds:g} s"
        cursor = QueryCursor(query)
        cursor.set_byte_range(start, min(start + SLICE_BYTES, size))
        for node in cursor.captures(root).get("ref", []):
            if node.start_byte < start or node.end_byte in definition_names:
                continue  # a node straddling the slice start was counted in the slice before
            name = _text(node)
            if not name or len(name) > 200:
                continue
            lines = found.setdefault(name, set())
            line = node.start_point[0] + 1
            if line not in lines:
                if kept >= room:
                    return _sorted(found), f"more than {BUDGET.structure:,} symbols"
                lines.add(line)
                kept += 1
    return _sorted(found), None


def _sorted(found: dict[str, set[int]]) -> dict[str, list[int]]:
    return {name: sorted(lines) for name, lines in found.items() if lines}
