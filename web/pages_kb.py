"""Console pages for reading the knowledge base: sources, documents, search playground, deletes."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from models.search import SearchQuery
from services.access.scope import current_scope
from services.core.errors import InvalidArgument
from services.core.validation import parse_uuid
from services.documents.browse import DOCUMENT_SORTS, BrowseService
from services.flags.reading import ReadingPolicy, chunk_view
from services.flags.store import FlagStore
from services.search import SEARCH_TYPES
from web.core import Console, query_int

PER_PAGE = 20


def routes(console: Console) -> list[Route]:
    async def browse() -> BrowseService:
        return BrowseService((await console.app()).db)

    async def sources(request: Request) -> Response:
        page = query_int(request, "page", 1)
        rows, total = await (await browse()).source_rows(page, PER_PAGE)
        return console.render(request, "sources.html", rows=rows, total=total, page=page, per_page=PER_PAGE)

    async def source(request: Request) -> Response:
        app = await console.app()
        src = await app.sources.get(request.path_params["source_id"])
        sort = request.query_params.get("sort", "created")
        sort = sort if sort in DOCUMENT_SORTS else "created"
        descending = request.query_params.get("dir") == "desc"
        page = query_int(request, "page", 1)
        svc = await browse()
        docs = await svc.documents(src.id, page, PER_PAGE, sort, descending)
        stats = await app.sources.stats(src.id)
        jobs = await app.jobs.list(None, src.id, 1, 5)
        return console.render(
            request,
            "source.html",
            source=src,
            origin=await app.sources.origin(src),
            docs=docs,
            stats=stats,
            jobs=jobs.items,
            sort=sort,
            descending=descending,
            sorts=list(DOCUMENT_SORTS),
        )

    async def flagged(request: Request) -> Response:
        """A source's chunks with injection flags (services/flags), 20 a page."""
        app = await console.app()
        src = await app.sources.get(request.path_params["source_id"])
        page = query_int(request, "page", 1)
        rows, total = await FlagStore(app.db).flagged(src.id, page, PER_PAGE)
        rows = [chunk_view(r) for r in rows]  # the reading policy: withheld from a caller that leaves them out
        return console.render(request, "flagged.html", source=src, rows=rows, total=total, page=page, per_page=PER_PAGE)

    async def document(request: Request) -> Response:
        app = await console.app()
        doc = await app.documents.get(request.path_params["document_id"])
        src = await app.sources.get(doc.source_id)
        window = await app.documents.read_window(doc.id, 0, 200_000)
        shown = await ReadingPolicy(app.db).window_view(doc.id, window.model_dump())  # the reading policy
        chunks = [chunk_view(c.model_dump()) for c in await (await browse()).chunks(doc.id)]
        links = await app.documents.links(doc.id) or {}
        return console.render(
            request,
            "document.html",
            doc=doc,
            source=src,
            content=shown["text"],
            window=window,
            shown=shown,
            chunks=chunks,
            links=links,
        )

    async def delete_document(request: Request) -> Response:
        app = await console.app()
        doc = await app.documents.get(request.path_params["document_id"])
        if request.method == "GET":
            return console.render(
                request,
                "confirm_delete.html",
                kind="document",
                item=doc,
                title=doc.title,
                action=f"/documents/{doc.id}/delete",
                back=f"/documents/{doc.id}",
                detail=f"{doc.chunk_count} chunks will be deleted with it.",
            )
        result = await app.documents.delete(doc.id)
        return RedirectResponse(f"/sources/{result['source_id']}?deleted={result['chunks_deleted']}", 303)

    async def delete_source(request: Request) -> Response:
        app = await console.app()
        src = await app.sources.get(request.path_params["source_id"])
        if request.method == "GET":
            stats = await app.sources.stats(src.id)
            return console.render(
                request,
                "confirm_delete.html",
                kind="source",
                item=src,
                title=src.title,
                action=f"/sources/{src.id}/delete",
                back=f"/sources/{src.id}",
                detail=f"Its {stats.documents_count} documents and {stats.chunks_count} chunks "
                "will be deleted with it.",
            )
        await app.sources.delete(src.id)
        return RedirectResponse("/", 303)

    async def search(request: Request) -> Response:
        """The playground: one SearchQuery through the same entry as the tool and the CLI (a type or
        a count left empty takes the profile's default)."""
        app = await console.app()
        query = request.query_params.get("q", "").strip()
        search_type = request.query_params.get("type") or None
        source_id = request.query_params.get("source") or None
        profile = request.query_params.get("profile") or None
        count = query_int(request, "k", 10, 1, 20) if request.query_params.get("k") else None
        all_sources = await console.source_choices()
        profiles = await app.profiles.visible_names(current_scope())  # a tenant sees only its own
        result, latency_ms = None, None
        if query:
            if source_id:
                parse_uuid(source_id, "source", "Pick a source from the list.")
            if search_type is not None and search_type not in SEARCH_TYPES:
                raise InvalidArgument(
                    f"Invalid search type '{search_type}'.", f"Use one of: {', '.join(SEARCH_TYPES)}."
                )
            started = time.perf_counter()
            asked = SearchQuery(
                query=query, source_id=source_id, profile=profile, search_type=search_type, match_count=count
            )
            result = await app.queries.run(asked)
            latency_ms = (time.perf_counter() - started) * 1000
        titles = {str(s["id"]): s["title"] for s in all_sources}
        return console.render(
            request,
            "search.html",
            query=query,
            search_type=search_type or "",
            ran_type=result.search_type if result else "",
            source_id=source_id or "",
            k=count or "",
            sources=all_sources,
            titles=titles,
            outcome=result.outcome if result else None,
            latency_ms=latency_ms,
            search_types=SEARCH_TYPES,
            profiles=profiles,
            profile=profile or "",
        )

    return [
        console.route("/", sources),
        console.route("/sources/{source_id}", source),
        console.route("/sources/{source_id}/delete", delete_source, methods=["GET", "POST"], write=True),
        console.route("/sources/{source_id}/flagged", flagged),
        console.route("/documents/{document_id}", document),
        console.route("/documents/{document_id}/delete", delete_document, methods=["GET", "POST"], write=True),
        console.route("/search", search),
    ]
