"""A tool's arguments, spelled once as a pydantic model, and unknown arguments refused.

Each tool declares one `ToolArguments` model: its fields are the published input schema (compacted by
`tools/schemas.lean_input_schema`), the SDK-facing function is built from them (`tool_function`), and
the tool's body receives an instance of the model, never a `dict(locals())`. The SDK validates a call's
arguments against exactly these field types (its argument model is made from the same annotations); the
body's model is then constructed from the validated values without a second validation.

Unknown arguments are refused, never ignored: an agent that misspells `source_id` (or passes an argument
the tool does not have) must learn it, not get an answer that silently ignored it.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import BaseModel, ConfigDict

from services.core.validation import clean_text
from tools.common import failure
from tools.schemas import lean_input_schema

A = TypeVar("A", bound="ToolArguments")
R = TypeVar("R")


class ToolArguments(BaseModel):
    """One tool's arguments (the fields, their types and defaults, in published order)."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def names(cls) -> list[str]:
        return list(cls.model_fields)

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        """The published (compact) input schema."""
        return lean_input_schema(cls.model_json_schema())

    def cleaned(self: A) -> A:
        """These arguments with NUL etc. removed from every text (services.core.validation.clean_text)."""
        return type(self).model_construct(**clean_text(dict(self)))


def tool_function(
    name: str, arguments: type[A], run: Callable[[A, Context], Awaitable[R]], returns: Any
) -> Callable[..., Awaitable[R]]:
    """The function the SDK registers: keyword parameters made from `arguments`' fields (so the SDK's
    input schema and validation are the model's), plus the request `ctx`; it calls `run(model, ctx)`."""

    async def tool(ctx: Context, **values: Any) -> R:
        return await run(arguments.model_construct(**values), ctx)

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for field_name, field in arguments.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.default
        kind = inspect.Parameter.KEYWORD_ONLY
        parameters.append(inspect.Parameter(field_name, kind, default=default, annotation=field.annotation))
    tool.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    tool.__name__ = tool.__qualname__ = name
    return tool


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


def unknown_arguments(tool: str, arguments: dict[str, Any] | None, known: list[str]) -> CallToolResult | None:
    """INVALID_ARGUMENT naming each argument not in `known` (`tool`'s argument names); None when all are."""
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
