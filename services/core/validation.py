"""Argument checks shared by every service (so tools, CLI and workers get the same errors)."""

from __future__ import annotations

import re
from typing import Any
from uuid import UUID

from services.core.errors import InvalidArgument

MAX_PER_PAGE = 20


def parse_uuid(value: str | UUID | None, name: str, hint: str) -> UUID:
    """Parse an id argument; `hint` tells the agent where valid ids come from."""
    if isinstance(value, UUID):
        return value
    if not value:
        raise InvalidArgument(f"{name} is required for this action.", f"Provide {name}. {hint}")
    try:
        return UUID(str(value).strip())
    except ValueError:
        raise InvalidArgument(f"{name} '{str(value)[:80]}' is not a valid id (expected a UUID).", hint) from None


def check_page(page: int, per_page: int) -> tuple[int, int]:
    """Validate pagination: page ≥ 1, 1 ≤ per_page ≤ 20."""
    if page < 1:
        raise InvalidArgument(f"page must be 1 or more (got {page}).", "Use page=1 for the first page.")
    if not 1 <= per_page <= MAX_PER_PAGE:
        raise InvalidArgument(
            f"per_page must be between 1 and {MAX_PER_PAGE} (got {per_page}).",
            f"Use per_page={MAX_PER_PAGE} or less and page through with page=2, 3, ...",
        )
    return page, per_page


def check_start(start: int | str | None, page: int) -> int | None:
    """A row offset for a client paging by offset (None: page by number). It is honoured, never ignored:
    ignoring it would serve the first page again and loop such a client."""
    if start is None or start == "":
        return None
    text = str(start).strip()
    if not text.isdigit():
        raise InvalidArgument(
            f"offset must be a number of items, 0 or more (got {text[:40]!r}).",
            "Use offset=20 to list from the 21st item, or page=2.",
        )
    if page != 1:
        raise InvalidArgument("Pass page or offset, not both.", "Use offset alone, or page alone.")
    return int(text)


def require_text(value: str | None, name: str, max_length: int | None = None) -> str:
    if value is None or not value.strip():
        raise InvalidArgument(f"{name} is required and must not be empty.", f"Provide a non-empty {name}.")
    if max_length is not None and len(value) > max_length:
        raise InvalidArgument(
            f"{name} is too long ({len(value)} characters, at most {max_length}).", f"Shorten {name}."
        )
    return value.strip()


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL and lone surrogates: PostgreSQL text cannot hold them


def clean_text(value: Any) -> Any:
    """Remove characters PostgreSQL cannot store (NUL, lone surrogates) from a string, or recursively
    from every string (keys included) in a dict/list/tuple; anything else is returned unchanged."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("", value) if _UNSTORABLE.search(value) else value
    if isinstance(value, dict):
        return {clean_text(k): clean_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(clean_text(v) for v in value)
    return value


#: include/exclude path patterns of a crawl, a folder sync or a git sync (checked the same way for all three)
MAX_PATTERNS = 20
MAX_PATTERN_LENGTH = 300


def check_patterns(patterns: list[str] | None, name: str) -> list[str]:
    """A list of path globs: strings, blanks dropped, at most MAX_PATTERNS of at most MAX_PATTERN_LENGTH."""
    if not patterns:
        return []
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise InvalidArgument(f"{name} must be a list of strings.", f'Pass {name} like ["/docs/*", "blog"].')
    cleaned = [p.strip() for p in patterns if p.strip()]
    if len(cleaned) > MAX_PATTERNS:
        raise InvalidArgument(f"{name} has {len(cleaned)} patterns (at most {MAX_PATTERNS}).", "Use fewer patterns.")
    too_long = [p for p in cleaned if len(p) > MAX_PATTERN_LENGTH]
    if too_long:
        raise InvalidArgument(
            f"A pattern in {name} is longer than {MAX_PATTERN_LENGTH} characters.", "Use shorter patterns."
        )
    return cleaned
