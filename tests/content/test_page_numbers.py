"""Page numbers: chunks of a generated multi-page PDF and of a PPTX deck record their pages/slides,
search hits and chunk reads show `page_number` (int, or "first-last" when a chunk spans pages)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.chunking.base import Chunk
from services.chunking.pages import assign_pages, format_page_number, page_starts
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.support.mcp_helpers import client_in_own_task, ok
from tools.hits import HitShape, hit_views
from tools.manage_document import DocumentArguments, get_document

TOPICS = {1: "astronomy telescopes", 2: "volcano magma chambers", 4: "medieval bookbinding"}  # page 3 blank


def page_text(page: int) -> str:
    topic = TOPICS[page]
    return " ".join(f"Note {i} on pg{page}mark {topic} continues here." for i in range(12))


def make_pdf() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Field Notes")
    pdf.set_font("Helvetica", size=11)
    for page in range(1, 5):
        pdf.add_page()
        if page in TOPICS:
            pdf.multi_cell(0, 6, page_text(page))
    return bytes(pdf.output())


def make_pptx() -> bytes:
    import io

    from pptx import Presentation

    deck = Presentation()
    for title, body in [("Intro", "Welcome aboard."), ("Budget", "Spend on quinoa silos."), ("Close", "Thanks.")]:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = body
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def settings(database_url: str, files_dir: Path) -> Settings:
    return make_settings(database_url, files_dir, chunk_size=300, chunk_overlap=40)


@pytest.fixture(scope="module")
async def documents(app: Archivist, files_dir: Path) -> dict[str, Any]:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        (files_dir / "notes.pdf").write_bytes(make_pdf())
        (files_dir / "deck.pptx").write_bytes(make_pptx())
        (files_dir / "plain.md").write_text("# Plain\n\nNo pages in this astronomy note about quinoa.\n")
        source = await app.sources.create("Paged")
        ids = {}
        for name in ("notes.pdf", "deck.pptx", "plain.md"):
            result = await app.documents.create_from_file(source.id, files_dir / name)
            ids[name] = result.document.id
        return {"source_id": source.id, "ids": ids}


async def chunk_rows(app: Archivist, document_id: Any) -> list[Any]:
    return await app.db.pool.fetch(
        "SELECT chunk_index, text, char_start, char_end, page_start, page_end FROM chunks "
        "WHERE document_id = $1 ORDER BY chunk_index",
        document_id,
    )


def test_page_mapping_helpers() -> None:
    content = "one\n\f\ntwo two\n\f\n\n\f\nfour"
    assert page_starts(content) == [0, 5, 15, 18]
    chunks = [Chunk("one", 0, 3), Chunk("one\n\f\ntwo", 0, 9), Chunk("four", 19, 23)]
    assert [(c.page_start, c.page_end) for c in assign_pages(chunks, content)] == [(1, 1), (1, 2), (4, 4)]
    assert (format_page_number(3, 3), format_page_number(3, 4), format_page_number(None, None)) == (3, "3-4", None)


async def test_pdf_chunks_record_their_pages(app: Archivist, documents: dict[str, Any]) -> None:
    document_id = documents["ids"]["notes.pdf"]
    content = await app.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", document_id)
    assert content.count("\f") == 3  # four pages, the third blank
    rows = await chunk_rows(app, document_id)
    assert len(rows) >= 6
    for row in rows:
        expected_start = content[: row["char_start"]].count("\f") + 1
        expected_end = content[: row["char_end"]].count("\f") + 1
        assert (row["page_start"], row["page_end"]) == (expected_start, expected_end)
        marked = {int(page) for page in re.findall(r"pg(\d)mark", row["text"])}
        assert marked and row["page_start"] <= min(marked) and max(marked) <= row["page_end"]
    pages = {(row["page_start"], row["page_end"]) for row in rows}
    assert any(start < end for start, end in pages), "some chunk spans a page break"
    assert {start for start, _ in pages} >= {1, 2, 4} and 3 not in {start for start, _ in pages}


def hit_view(hit: Any) -> dict[str, Any]:
    """A hit as a reply shows it (default fields)."""
    return hit_views([hit], HitShape(), [], "english")[0]


@pytest.mark.usefixtures("owner")
async def test_search_hits_and_chunk_reads_show_page_number(app: Archivist, documents: dict[str, Any]) -> None:
    outcome = await app.search.search("volcano magma chambers", documents["source_id"], match_count=5)
    top = outcome.hits[0]
    assert top.document_id == documents["ids"]["notes.pdf"]
    rows = await chunk_rows(app, documents["ids"]["notes.pdf"])
    by_index = {row["chunk_index"]: row for row in rows}
    for hit in (h for h in outcome.hits if h.document_id == documents["ids"]["notes.pdf"]):
        # a result may be a passage of adjacent chunks: its pages run from its first chunk's to its last's
        parts = [by_index[i] for i in range(hit.chunk_index, (hit.chunk_index_end or hit.chunk_index) + 1)]
        expected = format_page_number(min(r["page_start"] for r in parts), max(r["page_end"] for r in parts))
        assert hit_view(hit)["page_number"] == expected
    assert 2 in range(top.page_start, top.page_end + 1)
    spanning = next(row for row in rows if row["page_start"] < row["page_end"])
    args = DocumentArguments(
        action="get", document_id=str(documents["ids"]["notes.pdf"]), chunk_index=spanning["chunk_index"], page=1
    )
    payload = await get_document(app, args)
    assert payload["chunk"]["page_number"] == f"{spanning['page_start']}-{spanning['page_end']}"
    assert "page_start" not in payload["chunk"]


@pytest.mark.usefixtures("owner")
async def test_pptx_chunks_record_slide_numbers(app: Archivist, documents: dict[str, Any]) -> None:
    outcome = await app.search.search("quinoa silos budget", documents["source_id"], match_count=3)
    hit = next(h for h in outcome.hits if h.document_id == documents["ids"]["deck.pptx"])
    assert (hit.heading_path, hit_view(hit)["page_number"]) == (["Budget"], 2)
    rows = await chunk_rows(app, documents["ids"]["deck.pptx"])
    assert [(r["text"].split("\n")[0], r["page_start"], r["page_end"]) for r in rows] == [
        ("# Intro", 1, 1),
        ("# Budget", 2, 2),
        ("# Close", 3, 3),
    ]


@pytest.mark.usefixtures("owner")
async def test_unpaged_documents_have_no_page_number(app: Archivist, documents: dict[str, Any]) -> None:
    outcome = await app.search.search("astronomy quinoa note", documents["source_id"], match_count=10)
    plain = [h for h in outcome.hits if h.document_id == documents["ids"]["plain.md"]]
    assert plain and all("page_number" not in hit_view(h) for h in plain)
    assert all(r["page_start"] is None for r in await chunk_rows(app, documents["ids"]["plain.md"]))


@pytest.mark.usefixtures("owner")
async def test_rechunking_on_title_change_keeps_pages(app: Archivist, documents: dict[str, Any]) -> None:
    document_id = documents["ids"]["notes.pdf"]
    before = [(r["char_start"], r["page_start"], r["page_end"]) for r in await chunk_rows(app, document_id)]
    result = await app.documents.update(document_id, title="Field Notes, revised")
    assert result.chunks_created == len(before)
    after = [(r["char_start"], r["page_start"], r["page_end"]) for r in await chunk_rows(app, document_id)]
    assert after == before


@pytest_asyncio.fixture(scope="module")
async def client(settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as c:
        yield c


async def test_page_number_through_the_mcp_tools(client: Client, files_dir: Path) -> None:
    (files_dir / "mcp-notes.pdf").write_bytes(make_pdf())
    created = await ok(
        client, "manage_document", action="create", title="MCP paged", file_path=str(files_dir / "mcp-notes.pdf")
    )
    source_id = created["source_id"]
    found = await ok(client, "search_knowledge_base", query="medieval bookbinding", source_id=source_id)
    top = found["results"][0]
    assert top["page_number"] in (4, "3-4", "2-4", "1-4") and "page_start" not in top
    last = top["metadata"]["chunk_index"]
    chunk = await ok(client, "manage_document", action="get", document_id=top["document_id"], chunk_index=last)
    assert chunk["chunk"]["page_number"] == 4
