"""Parser for structured data files: JSON, YAML and TOML.

The file must parse; its original text is kept as content (minified one-line JSON is
pretty-printed so it can be chunked sensibly). YAML is composed by libyaml and counted on its node graph
(services/parsers/yaml_nodes.py) under the "structured" budget; these formats run in the limited worker
pool (a large YAML file costs hundreds of MB while it is composed).
"""

from __future__ import annotations

import json
import logging
import tomllib
from pathlib import Path
from typing import Any

import yaml

from services.core.budgets import budget
from services.core.errors import InvalidArgument
from services.parsers.base import DocumentParser, ParsedDocument
from services.parsers.text import decode_text, looks_binary
from services.parsers.yaml_nodes import compose_all

logger = logging.getLogger(__name__)

JSON_EXTENSIONS: tuple[str, ...] = (".json",)
YAML_EXTENSIONS: tuple[str, ...] = (".yaml", ".yml")
TOML_EXTENSIONS: tuple[str, ...] = (".toml",)
STRUCTURED_EXTENSIONS: tuple[str, ...] = JSON_EXTENSIONS + YAML_EXTENSIONS + TOML_EXTENSIONS

#: Single-line JSON longer than this is pretty-printed.
MINIFIED_JSON_THRESHOLD = 2000


def _invalid(kind: str, name: str, detail: str) -> InvalidArgument:
    """The error raised for a structured file that does not parse."""
    return InvalidArgument(
        f"{name} is not valid {kind}: {detail}",
        suggestion=f"Fix the {kind} syntax at the reported position (or rename the file to .txt "
        "to store it as plain text), then try again.",
    )


def _is_minified(text: str) -> bool:
    """True for JSON squeezed onto one very long line."""
    stripped = text.strip()
    return len(stripped) > MINIFIED_JSON_THRESHOLD and "\n" not in stripped


def parse_json(text: str, name: str) -> tuple[str, dict[str, Any]]:
    """Validate JSON; return the content to store (pretty-printed if minified) and metadata."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _invalid("JSON", name, f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from exc
    if _is_minified(text):
        return json.dumps(value, indent=2, ensure_ascii=False), {"pretty_printed": True}
    return text, {}


def parse_yaml(text: str, name: str) -> tuple[str, dict[str, Any]]:
    """Validate YAML syntax (all documents; custom tags such as `!Ref` are allowed), within the budget."""
    try:
        documents = compose_all(text, budget("structured"))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise _invalid("YAML", name, f"{exc.problem or exc.context}{where}") from exc
    except yaml.YAMLError as exc:
        raise _invalid("YAML", name, str(exc)) from exc
    return text, {"documents": documents}


def parse_toml(text: str, name: str) -> tuple[str, dict[str, Any]]:
    """Validate TOML; content is the original text."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _invalid("TOML", name, str(exc)) from exc
    return text, {}


class StructuredParser(DocumentParser):
    """JSON, YAML and TOML files, validated and stored as text."""

    extensions = STRUCTURED_EXTENSIONS

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Validate the file's syntax; raise InvalidArgument with the error position if it is broken."""
        name = path.name if path is not None else "document"
        suffix = path.suffix.lower() if path is not None else ".json"
        if looks_binary(data):
            raise InvalidArgument(
                f"{name} looks like a binary file (NUL bytes in its first 8 KB)",
                suggestion="Only text-encoded JSON, YAML and TOML files can be added.",
            )
        text = decode_text(data)
        if suffix in YAML_EXTENSIONS:
            document_type, (content, metadata) = "yaml", parse_yaml(text, name)
        elif suffix in TOML_EXTENSIONS:
            document_type, (content, metadata) = "toml", parse_toml(text, name)
        else:
            document_type, (content, metadata) = "json", parse_json(text, name)
        logger.debug("parsed %s as %s (%d chars)", name, document_type, len(content))
        return ParsedDocument(content=content, title=None, document_type=document_type, metadata=metadata)
