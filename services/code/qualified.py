"""Qualified references of a Python file: each use of a name with the qualifier it resolves to (issue 36).

`references` (services/code/symbols.py) keeps every identifier by its last part, so a query for
`shutil.copytree` would match any `x.copytree`. Here each use gets the qualifier it stands for, as far
as the file itself says, from its imports:

* `shutil.copytree(...)`, and `sh.copytree` after `import shutil as sh`: `copytree` qualified `shutil`
  (the first part of the written chain resolved through the file's imports, the rest kept);
* `copytree(...)` after `from shutil import copytree` (or `... as ct`, then `ct(...)`), and the import
  line itself: `copytree` qualified `shutil`;
* `import os.path`: `path` qualified `os`; `path.join` after `from os import path`: `path` qualified
  `os` (the head of a chain is a use too) and `join` qualified `os.path`;
* a bare use of a name the file defines at its top level: qualified `.`, the file's own module, which
  the reader turns into the module its path names (a rename needs no rewrite).

What the file cannot say is left out: an instance's methods (`p.read_text()`), names bound by
assignment, relative imports (their dots are dropped: `from .m import y` qualifies `y` as `m`).
Keyword argument names and parameters (of functions and lambdas) are not uses. The walk shares the
symbol budget's deadline.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

OWN_MODULE = "."
SKIPPED_PARENTS = frozenset({"parameters", "lambda_parameters", "typed_parameter"})
#: nodes whose `name` field is a parameter or keyword, not a use (their value is one)
NAMING = frozenset({"default_parameter", "typed_default_parameter", "keyword_argument"})
SPLATS = frozenset({"list_splat_pattern", "dictionary_splat_pattern"})


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _module(node: Any) -> str:
    """A from-import's module as written, relative dots dropped."""
    if node is None:
        return ""
    if node.type == "relative_import":
        inner = next((c for c in node.named_children if c.type == "dotted_name"), None)
        return _text(inner)
    return _text(node)


@cache
def _query(pattern: str) -> Any:
    from tree_sitter import Query
    from tree_sitter_language_pack import get_language

    return Query(get_language("python"), pattern)


def _nodes(root: Any, pattern: str) -> list[Any]:
    """The nodes a query captures (found by tree-sitter, not walked here: the Python walk of every node
    was most of a file's symbol time), last in the file first: the order the depth-first walk this
    replaces visited them in (so an earlier import still wins over a later one of the same name)."""
    from tree_sitter import QueryCursor

    captured = QueryCursor(_query(pattern)).captures(root)
    nodes = [node for group in captured.values() for node in group]
    nodes.sort(key=lambda n: n.start_byte, reverse=True)
    return nodes


def bindings(root: Any) -> dict[str, str]:
    """Names the file's imports bind -> the dotted name each stands for."""
    bound: dict[str, str] = {}
    for node in _nodes(root, "[(import_statement) (import_from_statement)] @import"):
        if node.type == "import_statement":
            for item in node.children_by_field_name("name"):
                if item.type == "aliased_import":
                    bound[_text(item.child_by_field_name("alias"))] = _text(item.child_by_field_name("name"))
                else:
                    first = _text(item).split(".", 1)[0]
                    bound[first] = first
        elif node.type == "import_from_statement":
            module = _module(node.child_by_field_name("module_name"))
            for item in node.children_by_field_name("name"):
                written = item.child_by_field_name("name") if item.type == "aliased_import" else item
                alias = item.child_by_field_name("alias") if item.type == "aliased_import" else item
                if module:
                    bound[_text(alias)] = f"{module}.{_text(written)}"
    return bound


def _chain(node: Any) -> list[str] | None:
    """`a.b.c` written as identifiers and attributes -> [a, b, c]; None for anything else (a call...)."""
    if node.type == "identifier":
        return [_text(node)]
    if node.type == "attribute":
        head = _chain(node.child_by_field_name("object"))
        tail = node.child_by_field_name("attribute")
        return head + [_text(tail)] if head is not None and tail is not None else None
    return None


def _qualify(node: Any, bound: dict[str, str], own: set[str]) -> tuple[str, str] | None:
    """(name, qualifier) of one identifier use, None when the file does not say."""
    parent = node.parent
    name = _text(node)
    if parent is None or parent.type in SKIPPED_PARENTS:
        return None
    if parent.type in NAMING and parent.child_by_field_name("name") == node:
        return None
    if parent.type in SPLATS and parent.parent is not None and parent.parent.type in SKIPPED_PARENTS:
        return None  # *args, **kwargs
    if parent.type == "attribute" and parent.child_by_field_name("attribute") == node:
        chain = _chain(parent.child_by_field_name("object"))
        if not chain:
            return None
        return name, ".".join([bound.get(chain[0], chain[0]), *chain[1:]])
    if parent.type == "dotted_name":
        holder = parent.parent
        if (
            holder is not None
            and holder.type == "import_from_statement"
            and holder.child_by_field_name("module_name") != parent
        ):
            module = _module(holder.child_by_field_name("module_name"))
            return (name, module) if module else None
        if holder is not None and holder.type == "aliased_import" and holder.parent is not None:
            if holder.parent.type == "import_from_statement":
                module = _module(holder.parent.child_by_field_name("module_name"))
                return (name, module) if module else None
        before = [_text(c) for c in parent.named_children if c.end_byte <= node.start_byte]
        return (name, ".".join(before)) if before else None
    if parent.type == "aliased_import":
        return None  # the alias itself
    target = bound.get(name)
    if target is not None and "." in target:
        module, original = target.rsplit(".", 1)
        return original, module
    if name in own and target is None:
        return name, OWN_MODULE
    return None


def qualified_references(
    root: Any, definition_ends: set[int], own: set[str], deadline: float
) -> tuple[dict[tuple[str, str], list[int]], bool]:
    """(name, qualifier) -> sorted distinct lines, over every identifier that names no definition; and
    whether the deadline stopped the walk."""
    bound = bindings(root)
    found: dict[tuple[str, str], set[int]] = {}
    for visited, node in enumerate(_nodes(root, "(identifier) @name"), 1):
        if visited % 4096 == 0 and time.monotonic() > deadline:
            return _sorted(found), True
        if node.end_byte not in definition_ends:
            use = _qualify(node, bound, own)
            if use is not None and use[0] and len(use[0]) <= 200 and len(use[1]) <= 500:
                found.setdefault(use, set()).add(node.start_point[0] + 1)
    return _sorted(found), False


def _sorted(found: dict[tuple[str, str], set[int]]) -> dict[tuple[str, str], list[int]]:
    return {key: sorted(lines) for key, lines in found.items()}
