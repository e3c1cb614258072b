"""Office and e-book formats: files written at test time by the real libraries, parsed, ingested into
PostgreSQL and found by search with the right heading path."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest

from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.core.errors import InvalidArgument
from services.parsers import get_parser, parse_bytes, supported_extensions

# --- writers ----------------------------------------------------------------------------------------


def make_docx() -> bytes:
    import docx

    document = docx.Document()
    document.core_properties.title = "Garden Handbook"
    document.add_heading("Garden Handbook", 0)
    document.add_heading("Soil preparation", 1)
    document.add_paragraph("Mix compost into the clay before planting.")
    document.add_heading("Raised beds", 2)
    document.add_paragraph("Cedar planks resist rot; line each bed with hardware cloth against voles.")
    document.add_paragraph("Water the beds at dawn", style="List Bullet")
    document.add_paragraph("Mulch in late autumn", style="List Bullet")
    document.add_heading("Pests", 1)
    table = document.add_table(rows=3, cols=2)
    rows = [("Pest", "Remedy"), ("Aphids", "Ladybirds"), ("Slugs", "Copper tape")]
    for row, values in zip(table.rows, rows, strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_paragraph("# tags in body text are not headings")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_pptx() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    titles = ["Quarterly review", "Harbour logistics", "Next steps"]
    bodies = ["Revenue grew in every region.", "Container cranes idle for barnacle inspection.", "Hire two pilots."]
    for title, body in zip(titles, bodies, strict=True):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text_frame.text = body
    table = deck.slides[2].shapes.add_table(2, 2, Inches(1), Inches(4), Inches(4), Inches(1)).table
    for (row, col), value in {(0, 0): "Role", (0, 1): "Start", (1, 0): "Pilot", (1, 1): "March"}.items():
        table.cell(row, col).text = value
    deck.slides[1].notes_slide.notes_text_frame.text = "Mention the tide tables."
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_xlsx() -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Inventory"
    sheet.append(["Item", "Count", "Shelf"])
    for index in range(45):
        sheet.append([f"widget-{index}", index * 2, f"S{index % 5}"])
    sheet.append(["tungsten anvil", 3, "Vault"])
    other = workbook.create_sheet("Suppliers")
    other.append(["Supplier", "City"])
    other.append(["Acme Forge", "Sheffield"])
    workbook.properties.title = "Stock list"
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def make_epub() -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("archivist-test-book")
    book.set_title("Lighthouse Stories")
    book.set_language("en")
    one = epub.EpubHtml(title="Keepers", file_name="one.xhtml", lang="en")
    one.content = "<h1>The Keepers</h1><p>Every keeper trimmed the wick at dusk.</p>"
    two = epub.EpubHtml(title="Storms", file_name="two.xhtml", lang="en")
    two.content = (
        "<h1>Storm Season</h1><p>Gales arrive in November.</p>"
        "<h2>The Great Gale</h2><p>The lantern glass shattered and the fresnel lens survived.</p>"
    )
    for chapter in (one, two):
        book.add_item(chapter)
    book.toc = [one, two]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", one, two]
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()


def make_odt() -> bytes:
    from odf import dc, opendocument, text

    document = opendocument.OpenDocumentText()
    document.meta.addElement(dc.Title(text="Brewing Notes"))
    document.text.addElement(text.H(outlinelevel=1, text="Brewing"))
    document.text.addElement(text.P(text="Start with clean equipment."))
    document.text.addElement(text.H(outlinelevel=2, text="Fermentation"))
    document.text.addElement(text.P(text="Keep the carboy at eighteen degrees so the saison yeast stays calm."))
    items = text.List()
    for value in ("Check gravity daily", "Rack after two weeks"):
        item = text.ListItem()
        item.addElement(text.P(text=value))
        items.addElement(item)
    document.text.addElement(items)
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


RTF = (
    r"{\rtf1\ansi\deff0{\fonttbl{\f0 Arial;}}"
    r"{\stylesheet{\s0 Normal;}{\s1\b\fs32 heading 1;}{\s2\b\fs28 heading 2;}}"
    "\n"
    r"{\pard\s1 Sailing Manual\par}"
    "\n"
    r"{\pard\s0 Read this before leaving the marina.\par}"
    "\n"
    r"{\pard\s2 Reefing\par}"
    "\n"
    r"{\pard\s0 Reef the mainsail early when the anemometer shows \b twenty knots\b0 .\par}"
    "\n}"
)

CSV = "city,country,population\n" + "".join(f"town{i},Land{i % 3},{i * 1000}\n" for i in range(30))
CSV += "Reykjavik,Iceland,139875\n"

FILES: dict[str, Any] = {
    "handbook.docx": make_docx,
    "review.pptx": make_pptx,
    "stock.xlsx": make_xlsx,
    "stories.epub": make_epub,
    "brewing.odt": make_odt,
    "sailing.rtf": lambda: RTF.encode("ascii"),
    "cities.csv": lambda: CSV.encode(),
}


def parse(name: str) -> Any:
    return parse_bytes(FILES[name](), Path(name))


# --- parsing ----------------------------------------------------------------------------------------


def test_new_extensions_are_registered() -> None:
    extensions = set(supported_extensions())
    assert {".docx", ".pptx", ".xlsx", ".xlsm", ".csv", ".tsv", ".epub", ".odt", ".rtf"} <= extensions
    for extension in (".docx", ".pptx", ".xlsx", ".epub", ".odt", ".rtf", ".csv"):
        assert extension in get_parser(Path(f"x{extension}")).extensions


def test_docx_headings_lists_and_tables() -> None:
    document = parse("handbook.docx")
    assert (document.title, document.document_type) == ("Garden Handbook", "docx")
    content = document.content
    assert content.startswith("# Garden Handbook\n\n## Soil preparation\n\nMix compost")
    assert "### Raised beds" in content and "## Pests" in content
    assert "- Water the beds at dawn\n- Mulch in late autumn" in content
    assert "| Pest | Remedy |\n|---|---|\n| Aphids | Ladybirds |\n| Slugs | Copper tape |" in content
    assert content.endswith("\n\n\\# tags in body text are not headings")


def test_pptx_slides_are_sections_separated_by_page_breaks() -> None:
    document = parse("review.pptx")
    assert (document.title, document.document_type, document.metadata) == ("Quarterly review", "pptx", {"slides": 3})
    slides = document.content.split("\n\f\n")
    assert [s.split("\n")[0] for s in slides] == ["# Quarterly review", "# Harbour logistics", "# Next steps"]
    assert "Container cranes idle" in slides[1] and "Notes: Mention the tide tables." in slides[1]
    assert "| Role | Start |\n|---|---|\n| Pilot | March |" in slides[2]


def test_xlsx_sheets_become_tables_with_repeated_headers() -> None:
    document = parse("stock.xlsx")
    assert (document.title, document.document_type) == ("Stock list", "xlsx")
    content = document.content
    assert content.startswith("# Inventory\n\n| Item | Count | Shelf |\n|---|---|---|\n| widget-0 | 0 | S0 |")
    assert content.count("| Item | Count | Shelf |") == 3  # 46 rows in blocks of 20
    assert "| tungsten anvil | 3 | Vault |" in content
    assert "# Suppliers\n\n| Supplier | City |\n|---|---|\n| Acme Forge | Sheffield |" in content


def test_csv_is_a_markdown_table() -> None:
    document = parse("cities.csv")
    assert (document.document_type, document.metadata) == ("csv", {"format": "csv"})
    assert document.content.startswith("| city | country | population |\n|---|---|---|\n| town0 | Land0 | 0 |")
    assert document.content.count("| city | country | population |") == 2
    assert document.content.endswith("| Reykjavik | Iceland | 139875 |")
    tsv = parse_bytes(b"a\tb\n1\t2|3\n", Path("t.tsv"))
    assert tsv.content == "| a | b |\n|---|---|\n| 1 | 2\\|3 |"


def test_epub_chapters_in_spine_order_with_headings() -> None:
    document = parse("stories.epub")
    assert (document.title, document.document_type) == ("Lighthouse Stories", "epub")
    content = document.content
    assert content.index("# The Keepers") < content.index("# Storm Season") < content.index("## The Great Gale")
    assert "The lantern glass shattered" in content


def test_odt_headings_and_lists() -> None:
    document = parse("brewing.odt")
    assert (document.title, document.document_type) == ("Brewing Notes", "odt")
    assert document.content == (
        "# Brewing\n\nStart with clean equipment.\n\n## Fermentation\n\n"
        "Keep the carboy at eighteen degrees so the saison yeast stays calm.\n\n"
        "- Check gravity daily\n- Rack after two weeks"
    )


def test_rtf_heading_styles_become_headings() -> None:
    document = parse("sailing.rtf")
    assert (document.title, document.document_type) == ("Sailing Manual", "rtf")
    assert document.content == (
        "# Sailing Manual\n\nRead this before leaving the marina.\n\n## Reefing\n\n"
        "Reef the mainsail early when the anemometer shows twenty knots."
    )


@pytest.mark.parametrize("name", ["bad.docx", "bad.pptx", "bad.xlsx", "bad.epub", "bad.odt"])
def test_corrupt_office_files_give_clear_errors(name: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_bytes(b"PK\x03\x04 this is not really a zip archive", Path(name))
    assert f"{name} is not a readable" in caught.value.message
    assert "uncorrupted" in caught.value.suggestion


def test_empty_documents_and_non_rtf_are_rejected() -> None:
    import docx

    out = io.BytesIO()
    docx.Document().save(out)
    with pytest.raises(InvalidArgument, match="has no text content"):
        parse_bytes(out.getvalue(), Path("empty.docx"))
    with pytest.raises(InvalidArgument, match="not a readable RTF"):
        parse_bytes(b"just text", Path("fake.rtf"))
    with pytest.raises(InvalidArgument):
        parse_bytes(_zip_without_content(), Path("empty.odt"))


def _zip_without_content() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
    return out.getvalue()


# --- ingestion and search ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def ingested(app: Archivist, files_dir: Path) -> dict[str, Any]:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        folder = files_dir / "office"
        folder.mkdir()
        for name, make in FILES.items():
            (folder / name).write_bytes(make())
        source = await app.sources.create("Office files")
        results, failures, skipped = await app.documents.create_from_directory(source.id, folder)
        assert (failures, skipped) == ([], 0)
        return {"source_id": source.id, "documents": {path.name: result.document for path, result in results}}


@pytest.mark.parametrize(
    ("query", "file_name", "heading_path", "snippet"),
    [
        ("cedar planks hardware cloth voles", "handbook.docx", ["Garden Handbook", "Soil preparation", "Raised beds"],
         "Cedar planks"),
        ("container cranes barnacle inspection", "review.pptx", ["Harbour logistics"], "barnacle"),
        ("tungsten anvil vault", "stock.xlsx", ["Inventory"], "tungsten anvil"),
        ("Acme Forge Sheffield supplier", "stock.xlsx", ["Suppliers"], "Acme Forge"),
        ("lantern glass shattered fresnel lens", "stories.epub", ["Storm Season", "The Great Gale"], "fresnel"),
        ("carboy saison yeast fermentation", "brewing.odt", ["Brewing", "Fermentation"], "saison"),
        ("reef the mainsail anemometer", "sailing.rtf", ["Sailing Manual", "Reefing"], "anemometer"),
        ("Reykjavik Iceland population", "cities.csv", [], "Reykjavik"),
    ],
)  # fmt: skip
@pytest.mark.usefixtures("owner")
async def test_each_format_is_found_with_its_heading_path(
    app: Archivist, ingested: dict[str, Any], query: str, file_name: str, heading_path: list[str], snippet: str
) -> None:
    document = ingested["documents"][file_name]
    outcome = await app.search.search(query, ingested["source_id"], match_count=3)
    top = outcome.hits[0]
    assert (top.document_id, top.heading_path) == (document.id, heading_path)
    assert snippet in top.text
    content = await app.db.pool.fetchval("SELECT content FROM documents WHERE id = $1", document.id)
    assert content[top.char_start : top.char_end] == top.text


async def test_ingested_documents_keep_type_and_title(ingested: dict[str, Any]) -> None:
    documents = ingested["documents"]
    assert {name: (d.document_type, d.title) for name, d in documents.items()} == {
        "handbook.docx": ("docx", "Garden Handbook"),
        "review.pptx": ("pptx", "Quarterly review"),
        "stock.xlsx": ("xlsx", "Stock list"),
        "stories.epub": ("epub", "Lighthouse Stories"),
        "brewing.odt": ("odt", "Brewing Notes"),
        "sailing.rtf": ("rtf", "Sailing Manual"),
        "cities.csv": ("csv", "cities.csv"),
    }
