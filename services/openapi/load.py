"""Recognise and load an OpenAPI 3.x / Swagger 2.0 specification from JSON or YAML text.

Detection is by content, not by file name: a mapping with a top-level `openapi` (3.x) or `swagger`
(2.0) key. A cheap text sniff runs first, so ordinary JSON and YAML files are never parsed twice.
YAML is built into Python values only once its aliases are counted within the "openapi" budget
(services/parsers/yaml_nodes.py): a few hundred bytes of aliases must not become a billion values.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import yaml

from services.core.budgets import budget
from services.core.errors import InvalidArgument, OverBudget
from services.parsers.yaml_nodes import load_one

logger = logging.getLogger(__name__)

#: Media types a spec is served with (besides plain JSON and YAML).
SPEC_MEDIA_TYPES = frozenset(
    {
        "application/json",
        "application/yaml",
        "application/x-yaml",
        "text/yaml",
        "text/x-yaml",
        "application/vnd.oai.openapi",
        "application/vnd.oai.openapi+json",
    }
)
_YAML_KEY = re.compile(r"^[\"']?(?:openapi|swagger)[\"']?\s*:", re.MULTILINE)
_JSON_KEY = re.compile(r"\"(?:openapi|swagger)\"\s*:")


def might_be_spec(text: str) -> bool:
    """A quick text check: could this JSON/YAML be a spec? (`load_spec_if_any` decides.)"""
    return bool(_JSON_KEY.search(text) or _YAML_KEY.search(text))


def spec_version(value: Any) -> str | None:
    """ "3.0.3", "3.1.0", "2.0"... for a parsed spec, else None."""
    if not isinstance(value, dict):
        return None
    version = value.get("openapi") or value.get("swagger")
    if version is None or not isinstance(value.get("paths", {}), dict):
        return None
    return str(version)


def parse_text(text: str, name: str = "spec") -> Any:
    """Parse JSON (when it looks like JSON) or YAML; InvalidArgument with the position on bad syntax,
    OverBudget for YAML whose aliases expand past the budget and for nesting too deep to parse."""
    stripped = text.lstrip()
    try:
        if stripped.startswith(("{", "[")):
            return json.loads(stripped)
        return load_one(text, budget("structured"))
    except RecursionError:
        raise budget("openapi").over(f"{name} is nested too deeply to parse") from None
    except json.JSONDecodeError as exc:
        raise _invalid(name, f"{exc.msg} at line {exc.lineno}, column {exc.colno}") from exc
    except yaml.YAMLError as exc:
        raise _invalid(name, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc


def load_spec_if_any(text: str, name: str = "spec") -> dict[str, Any] | None:
    """The parsed spec when `text` is one, else None (never raises for ordinary JSON/YAML)."""
    if not might_be_spec(text):
        return None
    try:
        value = parse_text(text, name)
    except OverBudget:
        raise  # a bomb is an error, not "not a spec"
    except InvalidArgument:
        return None
    return value if spec_version(value) else None


def load_spec(text: str, name: str = "spec") -> dict[str, Any]:
    """The parsed spec; InvalidArgument when `text` is not an OpenAPI/Swagger document."""
    value = parse_text(text, name)
    if not spec_version(value):
        raise InvalidArgument(
            f"{name} is not an OpenAPI or Swagger specification (no top-level 'openapi' or 'swagger' key).",
            "Pass an OpenAPI 3.x or Swagger 2.0 document in JSON or YAML.",
        )
    logger.debug("loaded %s: OpenAPI %s, %d paths", name, spec_version(value), len(value.get("paths") or {}))
    return value


def _invalid(name: str, detail: str) -> InvalidArgument:
    return InvalidArgument(
        f"{name} is not valid JSON or YAML: {detail}",
        "Fix the syntax at the reported position, then try again.",
    )
