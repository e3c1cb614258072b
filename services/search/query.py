"""One search request, one use case: what a `SearchQuery` means, decided once for every edge.

The MCP tool, the console and the CLI each build a `SearchQuery` (models/search.py) and shape the
`SearchResult` (JSON, HTML, a table). Everything a request means lives here: the profile it runs as
(and the caller's scope narrowed to that profile's sources, entered once), the profile's defaults,
its flagged exclusion and source order, its output settings, the library version, and cited passages
for `max_tokens`. A new search type is one entry in `SearchQueries.runners` (a coroutine from a
`Plan` to a `SearchOutcome`); every other rule above applies to it unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from models.access import Profile
from models.search import SearchQuery
from services.access.profile_settings import OutputSettings, check_fields
from services.access.profiles import ProfileService
from services.access.scope import Scope, current_scope, use_scope
from services.core.database import Database
from services.core.errors import InvalidArgument
from services.core.settings import Settings
from services.embeddings.base import Embedder
from services.search import SearchOutcome, SearchService
from services.search.context import Packed, check_max_tokens, pack_context, token_counter
from services.sources.service import SourceService
from services.sources.versions import ResolvedVersion, resolve

#: what a search uses when neither the call nor its profile says
BUILT_IN: dict[str, Any] = {"search_type": "hybrid", "match_count": 10}
DEFAULTED = ("search_type", "match_count", "similarity_threshold", "keyword_weight")


@dataclass(frozen=True)
class Plan:
    """A query with everything decided: what a runner of a search type is given."""

    query: str
    search_type: str
    match_count: int
    similarity_threshold: float | None
    keyword_weight: float | None
    source_id: str | UUID | None
    source_ids: list[str] | None
    source_order: list[UUID] | None  # the chosen profile's sources, first first
    exclude_flagged: bool
    keyword_mode: str | None
    hybrid_mode: str | None


@dataclass
class SearchResult:
    """What a search found and what it ran as; the edges shape it."""

    outcome: SearchOutcome
    search_type: str
    match_count: int  # asked for, after defaults (the outcome says what was used after capping)
    profile: Profile | None  # the profile searched as
    output: OutputSettings  # how the chosen profile (or the caller's profiles) shape hits
    served: ResolvedVersion | None = None  # the library version searched
    packed: Packed | None = None  # cited passages, when max_tokens was given
    max_tokens: int | None = None


@dataclass(frozen=True)
class Target:
    """What a code search reads: the profile searched as, the library version served, the source ids
    (None: every source the scope allows)."""

    profile: Profile | None
    served: ResolvedVersion | None
    source_ids: list[UUID] | None


Runner = Callable[[Plan], Awaitable[SearchOutcome]]


async def choose_profile(profiles: ProfileService, name: str | None) -> tuple[Profile | None, Scope]:
    """The profile a search runs as, and the scope it runs in.

    `name` must be one of the caller's profiles (any enabled profile for an unrestricted caller); the
    scope is then the caller's narrowed to that profile's sources. Without `name`, a caller confined to
    exactly one profile searches with that profile's defaults."""
    scope = current_scope()
    if not name:
        if len(scope.profiles) != 1:
            return None, scope
        name = scope.profiles[0]
    known = {p.name: p for p in await profiles.list()}
    allowed = [n for n in (scope.profiles or sorted(known)) if n in known and known[n].enabled]
    if name not in allowed:
        raise InvalidArgument(
            f"Unknown or disabled profile '{str(name)[:100]}'.",
            f"Use profile= one of: {', '.join(allowed) or '(none: leave profile out)'}.",
        )
    profile = known[name]
    return profile, scope.narrowed(frozenset(profile.source_ids), scope.profiles, profile.exclude_flagged)


async def leaves_out_flagged(profiles: ProfileService, chosen: Profile | None, scope: Scope) -> bool:
    """Whether this search leaves chunks with injection flags out: decided once, in the scope (any profile
    the caller is confined to, or the profile it searches as, says so: services/access/scope.py), the same
    rule every read door applies (services/flags/reading.py)."""
    return scope.exclude_flagged


def with_defaults(profile: Profile | None, given: dict[str, Any]) -> dict[str, Any]:
    """Arguments the caller left out (None) take the profile's defaults, then the built-in ones."""
    out = dict(given)
    for key in DEFAULTED:
        if out.get(key) is None and profile is not None:
            out[key] = getattr(profile, key)
        if out.get(key) is None and key in BUILT_IN:
            out[key] = BUILT_IN[key]
    return out


class SearchQueries:
    """The one entry every edge searches through: `run(SearchQuery)`."""

    def __init__(
        self,
        db: Database,
        search: SearchService,
        profiles: ProfileService,
        sources: SourceService,
        embedder: Embedder,
        settings: Settings,
    ) -> None:
        self.db = db
        self.search = search
        self.profiles = profiles
        self.sources = sources
        self.embedder = embedder
        self.settings = settings
        #: search type -> what answers it; the knowledge-base types rank chunks (the default)
        self.runners: dict[str, Runner] = {}

    async def run(self, q: SearchQuery) -> SearchResult:
        """The query as its profile (chosen or implied), in the caller's scope narrowed to that profile,
        entered once; cited passages instead of results when `max_tokens` is given."""
        if q.source_ids and (q.library or q.version):
            raise InvalidArgument("source_ids cannot be combined with library/version.", "Pass one or the other.")
        if q.max_tokens is not None:
            check_max_tokens(q.max_tokens)
        chosen, scope = await choose_profile(self.profiles, q.profile)
        output = await self.profiles.output_settings_for(scope, chosen)
        check_fields(q.fields)
        given = {
            "search_type": q.search_type,
            "match_count": q.match_count,
            "similarity_threshold": q.similarity_threshold,
            "keyword_weight": q.keyword_weight,
        }
        opts = with_defaults(chosen, given)
        exclude = await leaves_out_flagged(self.profiles, chosen, scope)
        with use_scope(scope):  # the caller's scope (entered by the gate), narrowed to the chosen profile
            served = await self.resolve_version(q) if q.library or q.version else None
            plan = Plan(
                q.query,
                opts["search_type"],
                opts["match_count"],
                opts["similarity_threshold"],
                opts["keyword_weight"],
                served.source_id if served else q.source_id,
                None if served else q.source_ids,
                chosen.source_ids if chosen else None,
                exclude,
                q.keyword_mode,
                q.hybrid_mode,
            )
            async with self.db.reading():
                outcome = await self.runners.get(plan.search_type, self.ranked)(plan)
            packed = await self.packed(outcome, q.max_tokens) if q.max_tokens is not None else None
        return SearchResult(outcome, plan.search_type, plan.match_count, chosen, output, served, packed, q.max_tokens)

    @asynccontextmanager
    async def within(self, q: SearchQuery) -> AsyncIterator[Target]:
        """The sources a code search (grep, definitions, references) reads for this query, chosen as
        `run` chooses them: as the query's profile, inside the caller's scope narrowed to it (entered for
        the block), at the library version asked for."""
        if q.source_ids and (q.library or q.version):
            raise InvalidArgument("source_ids cannot be combined with library/version.", "Pass one or the other.")
        chosen, scope = await choose_profile(self.profiles, q.profile)
        with use_scope(scope):
            served = await self.resolve_version(q) if q.library or q.version else None
            ids = [served.source_id] if served else await self.search.searched_sources(q.source_id, q.source_ids)
            yield Target(chosen, served, ids)

    async def ranked(self, plan: Plan) -> SearchOutcome:
        """The knowledge-base search types: chunks ranked by SearchService's strategies."""
        return await self.search.search(
            plan.query,
            plan.source_id,
            plan.match_count,
            plan.search_type,
            plan.similarity_threshold,
            plan.keyword_weight,
            source_ids=plan.source_ids,
            source_order=plan.source_order,
            exclude_flagged=plan.exclude_flagged,
            keyword_mode=plan.keyword_mode,
            hybrid_mode=plan.hybrid_mode,
        )

    async def resolve_version(self, q: SearchQuery) -> ResolvedVersion:
        """The source to search for library/version (the library of source_id when only a version is given)."""
        library = q.library
        if not library and q.source_id:
            library = (await self.sources.get(q.source_id)).title
        return await resolve(self.db, library, q.version)

    async def packed(self, outcome: SearchOutcome, max_tokens: int) -> Packed:
        """Passages packed to at most max_tokens (the embedding model's tokens), numbered with citations."""
        return await pack_context(
            self.db, outcome.hits, max_tokens, token_counter(self.embedder), self.settings.context_min_score_ratio
        )
