"""A schema as a compact, readable field list: one bullet per field with its type, required flag,
description, enum, default and example, nested fields indented below.

`$ref`s are followed through `SpecRefs`; a reference already being expanded on the current branch is
marked "recursive" instead of expanded again, and nesting stops at `max_depth`, so recursive and very
deep schemas stay small. `allOf` parts are merged, `oneOf`/`anyOf` alternatives listed. Every node
followed is counted against the "openapi" budget (`SpecRefs`), so `allOf`/`$ref` fan-out that would
render exponentially stops at the budget; values are written only up to the length shown (`dump`,
`one_line`), never expanded whole first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from services.openapi.resolve import SpecRefs, ref_name

MAX_DEPTH = 5
MAX_LINES = 200
MAX_TEXT = 300
MAX_INLINE_EXAMPLE = 80


@dataclass(frozen=True)
class Target:
    """A schema after following its `$ref`, with the chain of refs above it on this branch."""

    node: dict[str, Any]
    name: str | None  # the referenced schema's name, when reached through a $ref
    chain: tuple[str, ...]
    recursive: bool = False  # its ref is already being expanded above: do not expand again
    error: str | None = None


#: `one_line` reads at most this many characters per character it keeps.
READ_PER_KEPT = 8


def one_line(text: Any, limit: int = MAX_TEXT) -> str:
    """Whitespace collapsed, cut to `limit` characters (only the head of a long value is read)."""
    head = limit * READ_PER_KEPT
    raw = dump(text, limit=head) if isinstance(text, dict | list) else str(text)
    flat = " ".join(raw[:head].split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def dump(value: Any, indent: int | None = None, limit: int | None = None) -> str:
    """JSON text of an example (dates and other YAML scalars as strings); with `limit`, written only
    until it passes `limit` characters (a large or deeply shared value is never serialised whole)."""
    if limit is None:
        return json.dumps(value, indent=indent, ensure_ascii=False, default=str)
    parts: list[str] = []
    written = 0
    for part in json.JSONEncoder(indent=indent, ensure_ascii=False, default=str).iterencode(value):
        parts.append(part)
        written += len(part)
        if written > limit:
            break
    return "".join(parts)


class SchemaRenderer:
    """Renders schemas of one spec; `refs` follows its `$ref`s."""

    def __init__(self, refs: SpecRefs, max_depth: int = MAX_DEPTH, max_lines: int = MAX_LINES) -> None:
        self.refs = refs
        self.max_depth = max_depth
        self.max_lines = max_lines

    def target(self, schema: Any, chain: tuple[str, ...] = ()) -> Target:
        followed = self.refs.follow(schema)
        name = ref_name(followed.ref) if followed.ref else None
        if followed.ref and followed.ref in chain:
            return Target({}, name, chain, recursive=True)
        if not isinstance(followed.node, dict):
            return Target({}, name, chain, error=followed.error)
        return Target(followed.node, name, (*chain, followed.ref) if followed.ref else chain)

    def type_label(self, schema: Any, chain: tuple[str, ...] = ()) -> str:
        """E.g. "object `Pet`", "array of `Tag`", "string (date-time)", "integer | null"."""
        target = self.target(schema, chain)
        named = f"`{target.name}`" if target.name else ""
        if target.recursive:
            return f"{named}, recursive: see above"
        if target.error:
            return f"{named} ({target.error})"
        node = target.node
        kind = self._kind(node)
        if kind == "array" and "items" in node:
            label = f"array of {self.type_label(node['items'], target.chain)}"
            label = f"{named} ({label})" if named else label
        else:
            label = kind + (f" ({node['format']})" if node.get("format") else "")
            label = f"{label} {named}".strip()
        return label + (" | null" if node.get("nullable") is True else "")

    @staticmethod
    def _kind(node: dict[str, Any]) -> str:
        kind = node.get("type")
        if isinstance(kind, list):
            return " | ".join(str(k) for k in kind)
        if kind:
            return str(kind)
        if "properties" in node or "additionalProperties" in node:
            return "object"
        if "items" in node:
            return "array"
        for combinator in ("oneOf", "anyOf", "allOf"):
            if combinator in node:
                return "object" if combinator == "allOf" else combinator
        return ""

    def render(self, schema: Any) -> list[str]:
        """The field list of a schema (empty for a schema without fields, e.g. a plain string)."""
        lines: list[str] = []
        self._fields(self.target(schema), 0, lines)
        return lines

    def _fields(self, target: Target, depth: int, lines: list[str]) -> None:
        """Bullets for the fields of `target` (an object, an array's items, or alternatives)."""
        if target.recursive or target.error:
            return
        node = target.node
        if self._kind(node) == "array" and "items" in node:
            self._fields(self.target(node["items"], target.chain), depth, lines)
            return
        for name, schema, required in self._properties(target):
            if len(lines) >= self.max_lines:
                lines.append("  " * depth + "- … (more fields omitted)")
                return
            self._field(name, schema, required, target.chain, depth, lines)
        for combinator in ("oneOf", "anyOf"):
            for index, option in enumerate(node.get(combinator) or [], start=1):
                self._field(f"{combinator} option {index}", option, False, target.chain, depth, lines, code=False)

    def _field(
        self,
        name: str,
        schema: Any,
        required: bool,
        chain: tuple[str, ...],
        depth: int,
        lines: list[str],
        code: bool = True,
    ) -> None:
        target = self.target(schema, chain)
        details = [self.type_label(schema, chain)] + (["required"] if required else [])
        label = f"`{name}`" if code else name
        lines.append("  " * depth + f"- {label} ({', '.join(d for d in details if d)})" + self._notes(target.node))
        if self._has_fields(target):
            if depth + 1 >= self.max_depth:
                lines.append("  " * (depth + 1) + "- … (nested fields omitted)")
            else:
                self._fields(target, depth + 1, lines)

    def _has_fields(self, target: Target) -> bool:
        if target.recursive or target.error:
            return False
        node = target.node
        if self._kind(node) == "array" and "items" in node:
            return self._has_fields(self.target(node["items"], target.chain))
        return bool(self._properties(target) or node.get("oneOf") or node.get("anyOf"))

    def _properties(self, target: Target) -> list[tuple[str, Any, bool]]:
        """(name, schema, required) of an object's fields, `allOf` parts merged in order."""
        node = target.node
        fields: dict[str, Any] = {}
        required: set[str] = set()
        for part in node.get("allOf") or []:
            merged = self.target(part, target.chain)
            for name, schema, is_required in self._properties(merged):
                fields[name] = schema
                if is_required:
                    required.add(name)
        properties = node.get("properties")
        if isinstance(properties, dict):
            fields.update(properties)
        if isinstance(node.get("required"), list):
            required.update(str(name) for name in node["required"])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            fields["<any key>"] = extra
        return [(str(name), schema, str(name) in required) for name, schema in fields.items()]

    def _notes(self, node: dict[str, Any]) -> str:
        """ ": description. Enum: a | b. Default: x. Example: y." for one field."""
        notes: list[str] = []
        if node.get("description") or node.get("title"):
            notes.append(one_line(node.get("description") or node.get("title")))
        if isinstance(node.get("enum"), list):
            notes.append("Enum: " + " | ".join(f"`{one_line(v, 60)}`" for v in node["enum"][:30]))
        if "default" in node:
            notes.append(f"Default: `{inline_json(node['default'])}`")
        example = schema_example(node)
        if example is not None:
            notes.append(f"Example: `{inline_json(example)}`")
        flags = [flag for flag in ("deprecated", "readOnly", "writeOnly") if node.get(flag) is True]
        if flags:
            notes.append(", ".join(flags) + ".")
        return (": " + " ".join(n if n.endswith((".", "…")) else n + "." for n in notes)) if notes else ""


def inline_json(value: Any) -> str:
    """A short value as one line of JSON (cut with "…")."""
    return one_line(dump(value, limit=MAX_INLINE_EXAMPLE * READ_PER_KEPT), MAX_INLINE_EXAMPLE)


def schema_example(node: dict[str, Any]) -> Any:
    """A schema's `example`, or the first of its (3.1) `examples` list."""
    if "example" in node:
        return node["example"]
    examples = node.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    return None
