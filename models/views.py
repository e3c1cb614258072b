"""What an agent receives, item by item: the views replies are built from (issue 40, point 5).

A view names each field a reply item carries, in the order it is written; the tools build items from
these instead of dict literals. (The published outputSchema still types items only as arrays: the
`tools/list` budget of 7,000 characters has no room for their schemas today.)"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PassageView(BaseModel):
    """A cited passage of search_knowledge_base(max_tokens=...) (services/search/context.py packs them)."""

    n: int
    text: str
    tokens: int
    truncated: bool
    score: float
    uri: str
    #: document title, heading path, source, url, version and freshness of the passage
    citation: dict[str, Any] = Field(default_factory=dict)
    #: injection flags (docs/flags.md); a passage with any is marked untrusted
    flags: list[str] = Field(default_factory=list)
    untrusted: bool | None = None

    def item(self) -> dict[str, Any]:
        """The reply item: `untrusted` only on a flagged passage."""
        return self.model_dump(exclude=None if self.untrusted else {"untrusted"})
