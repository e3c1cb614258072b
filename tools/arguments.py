"""Unknown tool arguments are refused, never ignored: an agent that misspells `source_id` (or passes
an argument the tool does not have) must learn it, not get an answer that silently ignored it."""

from __future__ import annotations

import difflib
from typing import Any

from mcp.types import CallToolResult

from tools.common import failure


def _key(name: str) -> str:
    """Spelling-insensitive form: sourceId, source-id and SOURCE_ID all read as `sourceid`."""
    return name.replace("_", "").replace("-", "").lower()


def closest(name: str, known: list[str]) -> str | None:
    """The known argument `name` most likely meant (difflib), if any is close."""
    by_key = {_key(k): k for k in known}
    if _key(name) in by_key:
        return by_key[_key(name)]
    match = difflib.get_close_matches(_key(name), list(by_key), n=1, cutoff=0.6)
    if match:
        return by_key[match[0]]
    prefixed = [k for key, k in by_key.items() if len(_key(name)) >= 3 and key.startswith(_key(name))]
    return prefixed[0] if len(prefixed) == 1 else None  # `wait` -> `wait_seconds`


def unknown_arguments(tool: str, arguments: dict[str, Any] | None, schema: dict[str, Any]) -> CallToolResult | None:
    """INVALID_ARGUMENT naming each argument `tool`'s input schema does not have (None when all are known)."""
    known = list(schema.get("properties") or {})
    unknown = [name for name in (arguments or {}) if name not in known]
    if not unknown:
        return None
    hints = []
    for name in unknown[:5]:
        guess = closest(name, known)
        hints.append(f"`{name}` (did you mean `{guess}`?)" if guess else f"`{name}`")
    return failure(
        "INVALID_ARGUMENT",
        f"Unknown argument{'s' if len(unknown) > 1 else ''} for {tool}: {', '.join(hints)}.",
        f"{tool} takes: {', '.join(known)}.",
    )
