"""Word documents whose styles part is missing (or does not name a style) keep their headings,
read from the paragraph's style id (Heading1..Heading9, Title)."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from services.parsers import parse_bytes


def docx_without_styles() -> bytes:
    """A .docx written by python-docx, then rewritten without word/styles.xml and its relationship."""
    import docx

    document = docx.Document()
    document.add_paragraph("Field Notes", style="Title")
    document.add_paragraph("Observations from the marsh.")
    document.add_paragraph("Birds", style="Heading 1")
    document.add_paragraph("Herons wade at dawn.")
    document.add_paragraph("Waders", style="Heading 2")
    document.add_paragraph("Avocets sweep the mud.")
    raw = io.BytesIO()
    document.save(raw)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw.getvalue())) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            if item.filename == "word/styles.xml":
                continue
            data = source.read(item.filename)
            if item.filename == "word/_rels/document.xml.rels":
                data = re.sub(rb'<Relationship [^>]*Target="styles.xml"[^>]*/>', b"", data)
            if item.filename == "[Content_Types].xml":
                data = re.sub(rb'<Override PartName="/word/styles.xml"[^>]*/>', b"", data)
            target.writestr(item, data)
    return out.getvalue()


def test_headings_read_from_style_ids_without_styles_xml() -> None:
    data = docx_without_styles()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert "word/styles.xml" not in archive.namelist()
        assert b"styles.xml" not in archive.read("word/_rels/document.xml.rels")
    parsed = parse_bytes(data, Path("notes.docx"))
    lines = parsed.content.splitlines()
    assert "# Field Notes" in lines
    assert "## Birds" in lines
    assert "### Waders" in lines
    assert parsed.title == "Field Notes"


def test_headings_read_from_style_ids_the_styles_part_does_not_define() -> None:
    """styles.xml present, but without the Heading 1 / Title definitions."""
    import docx

    document = docx.Document()
    document.add_paragraph("Tide Tables", style="Title")
    document.add_paragraph("Low water", style="Heading 1")
    document.add_paragraph("Mudflats open at low water.")
    raw = io.BytesIO()
    document.save(raw)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw.getvalue())) as source, zipfile.ZipFile(out, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "word/styles.xml":
                for style_id in (b"Heading1", b"Title"):
                    data = re.sub(rb'<w:style [^>]*w:styleId="' + style_id + rb'".*?</w:style>', b"", data, flags=re.S)
                assert b'w:styleId="Heading1"' not in data
            target.writestr(item, data)
    parsed = parse_bytes(out.getvalue(), Path("tides.docx"))
    lines = parsed.content.splitlines()
    assert "# Tide Tables" in lines and "## Low water" in lines
