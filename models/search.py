"""One search request, as every edge spells it: the MCP tool, the console and the CLI each build a
`SearchQuery` and hand it to `services/search/query.py`, which owns what the request means (the
profile it runs as, that profile's defaults, flagged exclusion, source order, the library version)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SearchQuery(BaseModel):
    """None means "not given": the chosen profile's default applies, then the built-in one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    query: str
    #: one source by id (a title is resolved to its id by the edge that accepts titles)
    source_id: str | None = None
    #: more sources, each checked like `source_id`
    source_ids: list[str] | None = None
    #: search as this profile: its sources, defaults, flagged exclusion and source order
    profile: str | None = None
    search_type: str | None = None
    match_count: int | None = None
    similarity_threshold: float | None = None
    keyword_weight: float | None = None
    keyword_mode: str | None = None
    hybrid_mode: str | None = None
    #: the source of a library at a version ("3.x", ">=2.1"); a version alone means source_id's library
    library: str | None = None
    version: str | None = None
    #: cited passages packed to this many tokens instead of results
    max_tokens: int | None = None
    #: extra fields each result carries (the tool's `fields=`; shaping stays at the edge)
    fields: list[str] | None = None
