"""Fetcher interface: one URL to a page's text, links and cache validators."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FetchResult:
    url: str  # the URL asked for
    final_url: str  # after redirects
    status: int  # HTTP status (0 when no response: timeout, refused, blocked)
    content_type: str = ""
    title: str | None = None
    markdown: str = ""  # page text as markdown (empty for non-text content)
    links: list[str] = field(default_factory=list)  # absolute URLs found on the page
    etag: str | None = None
    last_modified: str | None = None
    error: str | None = None
    not_modified: bool = False  # 304 to a conditional request
    raw: bytes | None = None  # body for non-HTML documents handed to a parser (e.g. PDF)
    metadata: dict[str, Any] = field(default_factory=dict)  # from the page pipeline (extractor, generator...)

    @property
    def ok(self) -> bool:
        return self.error is None and 200 <= self.status < 300


class Fetcher(ABC):
    @abstractmethod
    async def fetch(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> FetchResult:
        """Fetch one URL. Never raises for HTTP/network failures: they come back in the result."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
