"""Tests for the document parsers; fixture files are written into tmp_path at test time."""

from __future__ import annotations

import codecs
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from services.core.errors import InvalidArgument
from services.parsers import get_parser, parse_bytes, supported_extensions
from services.parsers.base import ParsedDocument
from services.parsers.html import html_to_markdown

REPO_ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    """Write a fixture file and return its path."""
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def parse_file(path: Path) -> ParsedDocument:
    """Parse a fixture file the way the service does: bytes plus path."""
    return parse_bytes(path.read_bytes(), path)


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF (written by hand) with one line of Helvetica text per page."""
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    page_ids = [4 + 2 * index for index in range(len(pages))]
    kids = " ".join(f"{page_id} 0 R" for page_id in page_ids)
    objects[2] = f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode()
    for page_id, text in zip(page_ids, pages, strict=True):
        stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
        objects[page_id] = (
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {page_id + 1} 0 R >>"
        ).encode()
        objects[page_id + 1] = b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream"
    info = ""
    if title is not None:
        info_id = max(objects) + 1
        objects[info_id] = f"<< /Title ({title}) >>".encode("latin-1")
        info = f" /Info {info_id} 0 R"
    out = bytearray(b"%PDF-1.4\n")
    offsets: dict[int, int] = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n"
    xref_offset = len(out)
    size = max(objects) + 1
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for number in range(1, size):
        out += b"%010d 00000 n \n" % offsets[number]
    out += f"trailer\n<< /Size {size} /Root 1 0 R{info} >>\nstartxref\n{xref_offset}\n%%EOF\n".encode()
    return bytes(out)


def pdf_bytes(writer: PdfWriter) -> bytes:
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def encrypted_pdf(user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(["Secret text"]))))
    writer.encrypt(user_password=user_password, owner_password="owner-pass", algorithm="AES-128")
    return pdf_bytes(writer)


# --- text, markdown, code --------------------------------------------------------------------------


def test_markdown_title_is_first_h1_outside_code_fences(tmp_path: Path) -> None:
    content = "Intro line\n\n```\n# not the title\n```\n\n## Sub first\n\n# Real Title #\n\nBody.\n"
    document = parse_file(write(tmp_path, "guide.md", content))
    assert (document.title, document.document_type, document.content) == ("Real Title", "markdown", content)


def test_markdown_without_h1_has_no_title(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "notes.markdown", "## Only level two\n\ntext"))
    assert (document.title, document.document_type) == (None, "markdown")


def test_uppercase_extension_is_recognised(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "README.MD", "# Shouting\n"))
    assert (document.title, document.document_type) == ("Shouting", "markdown")


def test_source_code_is_kept_verbatim_with_language(tmp_path: Path) -> None:
    code = "# a comment\ndef add(a: int, b: int) -> int:\n    return a + b\n"
    document = parse_file(write(tmp_path, "calc.py", code))
    assert document.content == code  # not wrapped in a fence
    assert (document.title, document.document_type, document.metadata) == (None, "code", {"language": "python"})


@pytest.mark.parametrize(
    ("name", "document_type", "metadata"),
    [
        ("app.tsx", "code", {"language": "tsx"}),
        ("main.go", "code", {"language": "go"}),
        ("query.sql", "code", {"language": "sql"}),
        ("style.scss", "code", {"language": "scss"}),
        ("Dockerfile", "code", {"language": "dockerfile"}),
        ("notes.txt", "text", {}),
        ("README", "text", {}),
        (".gitignore", "text", {}),
        ("index.rst", "rst", {}),
    ],
)
def test_text_like_files_are_classified(tmp_path: Path, name: str, document_type: str, metadata: dict) -> None:
    document = parse_file(write(tmp_path, name, "Title\n=====\n\n# x, y\n1, 2\n"))
    assert (document.document_type, document.metadata, document.title) == (document_type, metadata, None)
    assert document.content == "Title\n=====\n\n# x, y\n1, 2\n"


def test_utf8_bom_is_dropped(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "bom.txt", codecs.BOM_UTF8 + "héllo".encode()))
    assert document.content == "héllo"


def test_invalid_utf8_falls_back_to_latin1(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "legacy.txt", b"caf\xe9 cr\xe8me"))
    assert document.content == "café crème"


def test_utf16_with_bom_is_text_not_binary(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "wide.txt", "wide ✓ text".encode("utf-16")))
    assert document.content == "wide ✓ text"


# --- structured -------------------------------------------------------------------------------------


def test_valid_json_keeps_original_text(tmp_path: Path) -> None:
    content = '{\n  "name": "archivist",\n  "tags": ["kb", "mcp"]\n}\n'
    document = parse_file(write(tmp_path, "package.json", content))
    assert (document.content, document.document_type, document.title) == (content, "json", None)


def test_minified_json_is_pretty_printed(tmp_path: Path) -> None:
    value = {"items": [{"id": index, "label": f"item number {index}"} for index in range(120)]}
    minified = json.dumps(value, separators=(",", ":"))
    assert len(minified) > 2000 and "\n" not in minified
    document = parse_file(write(tmp_path, "dump.json", minified))
    assert json.loads(document.content) == value
    assert document.content.count("\n") > 100
    assert document.metadata == {"pretty_printed": True}


def test_invalid_json_reports_position(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "broken.json", '{\n  "a": 1,\n  "b": \n}'))
    assert "broken.json is not valid JSON" in caught.value.message
    assert "line 4" in caught.value.message
    assert "Fix the JSON syntax" in caught.value.suggestion


def test_valid_yaml_with_custom_tags_and_documents(tmp_path: Path) -> None:
    content = "name: demo\nbucket: !Ref MyBucket\n---\nsecond: [1, 2]\n"
    document = parse_file(write(tmp_path, "stack.yml", content))
    assert (document.content, document.document_type, document.metadata) == (content, "yaml", {"documents": 2})


def test_invalid_yaml_reports_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "bad.yaml", "key: [unclosed\nother: 1\n"))
    assert caught.value.message.startswith("bad.yaml is not valid YAML")
    assert "line" in caught.value.message
    assert caught.value.code == "INVALID_ARGUMENT"


def test_valid_toml(tmp_path: Path) -> None:
    content = '[project]\nname = "archivist"\nversion = "0.1.0"\n'
    document = parse_file(write(tmp_path, "pyproject.toml", content))
    assert (document.content, document.document_type) == (content, "toml")


def test_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "bad.toml", '[project\nname = "x"\n'))
    assert "bad.toml is not valid TOML" in caught.value.message
    assert "line 1" in caught.value.message


# --- HTML -------------------------------------------------------------------------------------------

HTML_PAGE = """<!doctype html>
<html><head><title>  Archivist   Guide </title><style>body { color: red }</style>
<script>console.log("tracking")</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/docs">Docs</a></nav>
<h1>Getting started</h1>
<p>Install with <code>pip install archivist</code> and run_it.</p>



<h2>Configure</h2>
<ul><li>First</li><li>Second</li></ul>
<pre><code class="language-python">settings = load()
print(settings)
</code></pre>
<noscript>Enable JavaScript</noscript>
<footer>Copyright 2025</footer>
</body></html>
"""


def test_html_page_becomes_markdown_without_chrome(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "guide.html", HTML_PAGE))
    assert document.title == "Archivist Guide"
    assert document.document_type == "html"
    assert document.content == (
        "# Getting started\n\n"
        "Install with `pip install archivist` and run_it.\n\n"
        "## Configure\n\n"
        "- First\n- Second\n\n"
        "```python\nsettings = load()\nprint(settings)\n```"
    )
    for dropped in ("tracking", "color: red", "Home", "Enable JavaScript", "Copyright", "Archivist Guide"):
        assert dropped not in document.content
    assert "\n\n\n" not in document.content


def test_html_title_falls_back_to_first_h1() -> None:
    title, markdown = html_to_markdown("<body><h1> Only <em>Heading</em> </h1><p>Text.</p></body>")
    assert title == "Only Heading"
    assert markdown == "# Only *Heading*\n\nText."


def test_html_without_text_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "app.htm", "<html><body><script>render()</script></body></html>"))
    assert "no readable text" in caught.value.message


def test_html_declared_charset_is_honoured(tmp_path: Path) -> None:
    page = '<html><head><meta charset="windows-1252"></head><body><p>“quoted” café</p></body></html>'
    document = parse_file(write(tmp_path, "legacy.html", page.encode("cp1252")))
    assert document.content == "“quoted” café"


# --- PDF --------------------------------------------------------------------------------------------


def test_pdf_text_is_extracted_per_page(tmp_path: Path) -> None:
    path = write(tmp_path, "manual.pdf", make_pdf(["Hello Archivist page one", "Second page text"], "User Manual"))
    document = parse_file(path)
    assert document.content == "Hello Archivist page one\n\f\nSecond page text"
    assert (document.title, document.document_type, document.metadata) == ("User Manual", "pdf", {"pages": 2})


def test_pdf_without_title_metadata_has_no_title(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "untitled.pdf", make_pdf(["Just text"])))
    assert (document.title, document.content) == (None, "Just text")


def test_pdf_without_text_asks_for_ocr(tmp_path: Path) -> None:
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "scan.pdf", pdf_bytes(writer)))
    assert "no extractable text" in caught.value.message
    assert "OCR" in caught.value.suggestion


def test_password_protected_pdf_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "locked.pdf", encrypted_pdf("secret")))
    assert "encrypted" in caught.value.message


def test_pdf_with_only_an_owner_password_is_read(tmp_path: Path) -> None:
    document = parse_file(write(tmp_path, "restricted.pdf", encrypted_pdf("")))
    assert document.content == "Secret text"


@pytest.mark.parametrize("data", [b"%PDF-1.4\nthis is not a pdf", b"", make_pdf(["Cut short"])[:150]])
def test_corrupt_pdf_is_rejected(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "corrupt.pdf", data))
    assert "corrupt.pdf is not a readable PDF" in caught.value.message


# --- factory ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["blob.bin", "notes.txt", "README"])
def test_binary_content_is_rejected(tmp_path: Path, name: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_file(write(tmp_path, name, b"\x7fELF\x02\x01\x00\x00binary\x00data"))


def test_binary_with_text_extension_says_binary(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "image.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
    assert "binary" in caught.value.message


def test_unknown_extension_lists_supported_ones(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        parse_file(write(tmp_path, "archive.xyz", "plain words"))
    assert "Unsupported file type '.xyz'" in caught.value.message
    assert ".md" in caught.value.suggestion and ".pdf" in caught.value.suggestion


def test_supported_extensions_match_their_parsers() -> None:
    extensions = supported_extensions()
    assert extensions == sorted(set(extensions))
    assert {".md", ".markdown", ".rst", ".txt", ".py", ".ts", ".csv", ".json", ".yaml", ".yml", ".toml"} <= set(
        extensions
    )
    assert {".html", ".htm", ".pdf"} <= set(extensions)
    for extension in extensions:
        assert extension in get_parser(Path(f"file{extension}")).extensions


def test_parsers_are_imported_lazily() -> None:
    script = (
        "import sys\nfrom pathlib import Path\nimport services.parsers as p\n"
        "before = 'pypdf' in sys.modules or 'markdownify' in sys.modules\n"
        "p.get_parser(Path('x.pdf'))\n"
        "print(before, 'pypdf' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"]
