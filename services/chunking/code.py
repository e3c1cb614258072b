"""Code-aware chunker: split source files where the code splits, using tree-sitter.

How a file is cut:

1. The syntax tree's top-level nodes are grouped into *units*: every definition (function,
   class, method, struct, impl, interface, type, ...) is a unit of its own, together with the
   comments, doc comments, decorators and attributes directly above it (no blank line between);
   everything else between two definitions (imports, statements, fields) forms one unit.
   The units partition the file, so every non-blank character lands in some chunk.
2. A unit that fits in ``chunk_size`` (up to 1.5 x for a definition) is one chunk. A larger
   definition whose body holds definitions (a class, impl block, namespace) is split the same
   way one level down: its header (signature, docstring, fields) and each member separately.
   Any other large unit is cut by the text chunker in "code" mode (line breaks, overlap).
3. The heading path is ``[file name, enclosing definitions..., definition]``, e.g.
   ``["server.py", "Server", "handle"]``; Go methods sit under their receiver type.

Chunks satisfy ``content[c.char_start:c.char_end] == c.text`` and never start or end with
whitespace. A language without a grammar, or a file tree-sitter cannot parse, falls back to the
text chunker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from services.chunking.base import Chunk, Chunker
from services.chunking.markdown import MAX_CHUNK_FACTOR, MarkdownChunker
from services.chunking.trees import parse

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Language:
    grammar: str  # tree-sitter-language-pack name
    definitions: frozenset[str]  # node types that are a unit of their own
    wrappers: frozenset[str] = frozenset()  # nodes wrapping one definition (export, decorators)
    attached: frozenset[str] = frozenset({"comment"})  # leading nodes that belong to the next definition


_JS_DEFINITIONS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "class_declaration",
        "abstract_class_declaration",
        "method_definition",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "internal_module",
        "module",
        "function_signature",
        "abstract_method_signature",
    }
)
_JS = dict(wrappers=frozenset({"export_statement", "expression_statement"}), attached=frozenset({"comment"}))
_C_DEFINITIONS = frozenset(
    {"function_definition", "struct_specifier", "class_specifier", "namespace_definition", "enum_specifier"}
)

#: CODE_LANGUAGES names (services/parsers/text.py) with a grammar and definition node types.
LANGUAGES: dict[str, _Language] = {
    "python": _Language(
        "python", frozenset({"function_definition", "class_definition"}), frozenset({"decorated_definition"})
    ),
    "javascript": _Language("javascript", _JS_DEFINITIONS, **_JS),
    "jsx": _Language("javascript", _JS_DEFINITIONS, **_JS),
    "typescript": _Language("typescript", _JS_DEFINITIONS, **_JS),
    "tsx": _Language("tsx", _JS_DEFINITIONS, **_JS),
    "go": _Language("go", frozenset({"function_declaration", "method_declaration", "type_declaration"})),
    "rust": _Language(
        "rust",
        frozenset(
            {
                "function_item",
                "function_signature_item",
                "struct_item",
                "enum_item",
                "union_item",
                "impl_item",
                "trait_item",
                "mod_item",
                "macro_definition",
                "type_item",
            }
        ),
        attached=frozenset({"line_comment", "block_comment", "attribute_item", "inner_attribute_item"}),
    ),
    "java": _Language(
        "java",
        frozenset(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
                "method_declaration",
                "constructor_declaration",
            }
        ),
        attached=frozenset({"line_comment", "block_comment"}),
    ),
    "csharp": _Language(
        "csharp",
        frozenset(
            {
                "class_declaration",
                "struct_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "namespace_declaration",
                "method_declaration",
                "constructor_declaration",
                "delegate_declaration",
            }
        ),
    ),
    "ruby": _Language("ruby", frozenset({"class", "module", "method", "singleton_method", "singleton_class"})),
    "php": _Language(
        "php",
        frozenset(
            {
                "function_definition",
                "class_declaration",
                "interface_declaration",
                "trait_declaration",
                "enum_declaration",
                "method_declaration",
                "namespace_definition",
            }
        ),
    ),
    "c": _Language("c", _C_DEFINITIONS),
    "cpp": _Language("cpp", _C_DEFINITIONS | frozenset({"template_declaration"})),
}


def supports(language: object) -> TypeGuard[str]:
    """True when files of this CODE_LANGUAGES language are chunked by syntax."""
    return language in LANGUAGES


def _node_text(node: Any | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _first_named(node: Any, types: tuple[str, ...]) -> Any | None:
    """The first descendant (depth-first) of one of `types`."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.type in types:
            return current
        stack.extend(reversed(current.named_children))
    return None


class _Offsets:
    """UTF-8 byte offsets (tree-sitter) to character offsets (Python str)."""

    def __init__(self, content: str) -> None:
        self.ascii = content.isascii()
        if not self.ascii:  # each character's UTF-8 length from its code point, summed (a Python loop
            # over the characters cost ~1 s a MB)
            points = np.frombuffer(content.encode("utf-32-le", "surrogatepass"), dtype="<u4")
            self.byte_ends = np.cumsum(1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000))

    def char(self, byte_offset: int) -> int:
        return byte_offset if self.ascii else int(np.searchsorted(self.byte_ends, byte_offset, side="right"))


@dataclass
class _Unit:
    start: int  # character offsets
    end: int
    node: Any | None  # the definition node (unwrapped), None for a run of other code


class CodeChunker(Chunker):
    """Split source code at definition boundaries (see the module docstring)."""

    def __init__(self, chunk_size: int, overlap: int, language: str, file_name: str | None = None) -> None:
        self.text_chunker = MarkdownChunker(chunk_size, overlap, mode="code")
        self.chunk_size = chunk_size
        self.max_chunk = int(chunk_size * MAX_CHUNK_FACTOR)
        self.language = LANGUAGES[language]
        self.prefix = [file_name] if file_name else []

    def chunk(self, content: str) -> list[Chunk]:
        """Chunks at definition boundaries; the text chunker's output when the file cannot be parsed."""
        if not content.strip():
            return []
        try:
            source = content.encode("utf-8", "surrogatepass")
            tree = parse(self.language.grammar, source)  # the symbol table reads the same tree
        except Exception as exc:  # missing grammar, parser failure: never lose the file
            logger.warning("tree-sitter could not parse %s code (%s); using the text chunker", self.language, exc)
            return self._text_chunks(content, 0, len(content), self.prefix)
        self.content = content
        self.offsets = _Offsets(content)
        return self._split(tree.root_node.children, 0, len(content), self.prefix)

    # --- units -----------------------------------------------------------------------------------

    def _definition(self, node: Any) -> Any | None:
        """The definition a top-level node is or wraps, else None."""
        if not node.is_named:  # a keyword token such as Ruby's `class`
            return None
        if node.type in self.language.definitions:
            return node
        if node.type in self.language.wrappers:
            inner = node.child_by_field_name("declaration") or node.child_by_field_name("definition")
            if inner is None and node.named_child_count == 1:
                inner = node.named_children[0]
            if inner is not None:
                return self._definition(inner)
        if node.type in ("lexical_declaration", "variable_declaration"):  # const f = () => ...
            value = _first_named(node, ("arrow_function", "function_expression", "function", "class"))
            return node if value is not None else None
        return None

    def _units(self, nodes: list[Any], start: int, end: int) -> list[_Unit]:
        """Partition [start, end) into units at the starts of definitions and of other code."""
        marks: list[tuple[int, Any | None]] = [(start, None)]
        attach_from: int | None = None  # start of comments directly above the next node
        previous_end = start
        for node in nodes:
            node_start, node_end = self.offsets.char(node.start_byte), self.offsets.char(node.end_byte)
            if node_start < start or node_end > end:
                continue
            if attach_from is not None and self.content.count("\n", previous_end, node_start) > 1:
                marks.append((attach_from, None))  # comments followed by a blank line stand alone
                attach_from = None
            definition = self._definition(node)
            if node.type in self.language.attached and definition is None:
                attach_from = node_start if attach_from is None else attach_from
            elif definition is not None:
                marks.append((attach_from if attach_from is not None else node_start, definition))
                attach_from = None
            else:
                if attach_from is not None:
                    marks.append((attach_from, None))
                marks.append((node_start, None))
                attach_from = None
            previous_end = node_end
        if attach_from is not None:
            marks.append((attach_from, None))
        units: list[_Unit] = []
        for index, (mark_start, node) in enumerate(marks):
            mark_end = marks[index + 1][0] if index + 1 < len(marks) else end
            if mark_end <= mark_start:
                continue
            if node is None and units and units[-1].node is None:
                units[-1].end = mark_end  # one run of non-definition code
            else:
                units.append(_Unit(mark_start, mark_end, node))
        return self._merge_punctuation(units)

    def _merge_punctuation(self, units: list[_Unit]) -> list[_Unit]:
        """Fold runs holding no word characters (a closing `}`, a `;`) into the unit before them."""
        merged: list[_Unit] = []
        for unit in units:
            text = self.content[unit.start : unit.end]
            if unit.node is None and merged and not any(char.isalnum() for char in text):
                merged[-1].end = unit.end
            else:
                merged.append(unit)
        return merged

    # --- names -----------------------------------------------------------------------------------

    def _name(self, node: Any) -> str:
        """A short human name for a definition node ("Server", "handle", "impl Display for S")."""
        if node.type == "impl_item":
            trait, kind = node.child_by_field_name("trait"), node.child_by_field_name("type")
            return f"impl {_node_text(trait)} for {_node_text(kind)}" if trait else f"impl {_node_text(kind)}"
        if node.type == "type_declaration":
            spec = _first_named(node, ("type_spec", "type_alias"))
            return _node_text(spec.child_by_field_name("name")) if spec is not None else "type"
        if node.type in ("lexical_declaration", "variable_declaration"):
            declarator = _first_named(node, ("variable_declarator",))
            return _node_text(declarator.child_by_field_name("name")) if declarator is not None else "const"
        name = node.child_by_field_name("name")
        if name is None and node.child_by_field_name("declarator") is not None:  # C/C++ functions
            name = _first_named(
                node.child_by_field_name("declarator"), ("identifier", "field_identifier", "qualified_identifier")
            )
        if name is None and node.type == "template_declaration":
            inner = next((c for c in node.named_children if c.type in self.language.definitions), None)
            return self._name(inner) if inner is not None else "template"
        return _node_text(name) or node.type

    def _path(self, node: Any, parent: list[str]) -> list[str]:
        """Heading path of a definition; Go methods go under their receiver type."""
        if node.type == "method_declaration" and node.child_by_field_name("receiver") is not None:
            receiver = _first_named(node.child_by_field_name("receiver"), ("type_identifier",))
            if receiver is not None:
                return [*parent, _node_text(receiver), self._name(node)]
        return [*parent, self._name(node)]

    # --- chunks ----------------------------------------------------------------------------------

    def _split(self, nodes: list[Any], start: int, end: int, path: list[str]) -> list[Chunk]:
        chunks: list[Chunk] = []
        for unit in self._units(nodes, start, end):
            if unit.node is None:
                chunks += self._text_chunks(self.content, unit.start, unit.end, path)
                continue
            unit_path = self._path(unit.node, path)
            size = len(self.content[unit.start : unit.end].strip())
            members = self._members(unit.node)
            if size <= self.max_chunk or not members:
                chunks += self._text_chunks(self.content, unit.start, unit.end, unit_path, self.max_chunk)
            else:
                chunks += self._split(members, unit.start, unit.end, unit_path)
        return chunks

    def _members(self, node: Any) -> list[Any]:
        """Children of a definition's body when the body holds definitions (class members), else []."""
        body = node.child_by_field_name("body")
        if body is None:
            if node.type == "template_declaration":
                inner = next((c for c in node.named_children if c.type in self.language.definitions), None)
                return self._members(inner) if inner is not None else []
            if node.type in ("lexical_declaration", "variable_declaration"):
                return []
            body = node
        if body.type in ("block", "statement_block") and node.type not in ("class_definition", "internal_module"):
            return []  # a function body: its statements are cut as text
        children = list(body.children)
        if body is not node:  # comments between the header and the body belong to the first member
            children += [child for child in node.children if child.type in self.language.attached]
            children.sort(key=lambda child: child.start_byte)
        return children if any(self._definition(child) is not None for child in children) else []

    def _text_chunks(
        self, content: str, start: int, end: int, path: list[str], whole_up_to: int | None = None
    ) -> list[Chunk]:
        """Chunks for [start, end): one (trimmed) chunk when it fits, else the text chunker's cuts."""
        limit = whole_up_to or self.chunk_size
        text = content[start:end]
        stripped = text.strip()
        if not stripped:
            return []
        if len(stripped) <= limit:
            first = start + (len(text) - len(text.lstrip()))
            return [Chunk(stripped, first, first + len(stripped), list(path))]
        return [
            Chunk(c.text, c.char_start + start, c.char_end + start, list(path)) for c in self.text_chunker.chunk(text)
        ]
