"""Bombs: small inputs that expand, nest or fan out far past their size, one (or more) per format.

Each builder returns bytes or text a few KB to a few MB long whose naive parse costs gigabytes or
minutes. tests/security/test_budgets.py feeds them to every parser of the registry and to the spec,
sitemap, robots, llms.txt and git readers; tests/security/test_expansion_bombs.py sends the four
reported attacks through the server's real paths.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MB = 1024 * 1024
XML_LAUGHS = (
    '<!DOCTYPE lolz [<!ENTITY lol "lollollollollollollollollollol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + "]>"
)


# ---------------------------------------------------------------- measuring the server process


def peak_rss_reset() -> None:
    """Reset this process's peak RSS (VmHWM), so the next reading covers only what follows."""
    Path("/proc/self/clear_refs").write_text("5")


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


class Cost:
    """What a block cost: this process's peak RSS growth (MB), the largest peak RSS growth of a process
    it started (the parser pool's workers: what isolated work held at once), and wall time (s)."""

    grew_mb: float = 0.0
    worker_mb: float = 0.0
    seconds: float = 0.0


def descendants(pid: int) -> set[int]:
    """The processes below `pid` (the pool's forkserver and its workers), read from /proc."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        for children in Path(f"/proc/{todo.pop()}/task").glob("*/children"):
            try:
                pids = {int(child) for child in children.read_text().split()}
            except OSError:
                continue  # it ended meanwhile
            todo.extend(pids - found)
            found |= pids
    return found


def _status_kb(pid: int, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak(pid: int) -> None:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass  # it ended meanwhile


@contextmanager
def measured() -> Iterator[Cost]:
    cost = Cost()
    me = os.getpid()
    peak_rss_reset()
    workers = {pid: _status_kb(pid, "VmRSS") or 0 for pid in descendants(me)}
    for pid in workers:
        _reset_peak(pid)
    before, started = rss_kb("VmRSS"), time.perf_counter()
    try:
        yield cost
    finally:
        cost.seconds = time.perf_counter() - started
        cost.grew_mb = (rss_kb("VmHWM") - before) / 1024
        for pid in descendants(me):  # a worker started meanwhile counts whole
            peak = _status_kb(pid, "VmHWM") or 0
            cost.worker_mb = max(cost.worker_mb, (peak - workers.get(pid, 0)) / 1024)


# ---------------------------------------------------------------- OpenAPI


def yaml_alias_spec(levels: int = 9, width: int = 10) -> str:
    """An OpenAPI spec whose example is a billion-laughs chain of YAML aliases (~600 bytes)."""
    lines = ["openapi: 3.0.0", "info: {title: Laughs, version: '1'}", "x-l:", "  - &a0 [lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        lines.append(f"  - &a{level} [" + ",".join([f"*a{level - 1}"] * width) + "]")
    lines += [
        "paths:",
        "  /laughs:",
        "    get:",
        "      responses:",
        "        '200':",
        "          description: ok",
        "          content:",
        f"            application/json: {{example: *a{levels - 1}}}",
    ]
    return "\n".join(lines) + "\n"


def fanout_spec(levels: int = 32) -> str:
    """An OpenAPI spec whose schemas each merge the next one twice through `allOf` (~4.5 KB): 2^32
    schema nodes to render one response."""
    schemas: dict[str, object] = {}
    for level in range(levels):
        ref = {"$ref": f"#/components/schemas/Level{level + 1}"}
        schemas[f"Level{level}"] = {"allOf": [ref, ref], "description": f"Part {level}."}
    schemas[f"Level{levels}"] = {"type": "object", "properties": {"leaf": {"type": "string"}}}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Level0"}}}}
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "Fan-out", "version": "1"},
        "paths": {"/ledger": {"get": {"responses": {"200": {"description": "ok", **body}}}}},
        "components": {"schemas": schemas},
    }
    return json.dumps(spec)


# ---------------------------------------------------------------- crawl discovery


def entity_sitemap(size: int = 2 * MB) -> str:
    """A sitemap whose every <loc> repeats an entity of 280 characters (each reference ~95x its size,
    under expat's 100x amplification limit): ~200 MB of text once expanded."""
    head = (
        '<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY e "' + "x" * 280 + '">]>'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    )
    entry = "<url><loc>http://h.example/" + "&e;" * 100 + "</loc></url>"
    return head + entry * ((size - len(head)) // len(entry)) + "</urlset>"


def element_flood_sitemap(size: int = 2 * MB) -> str:
    """A sitemap of nothing but empty elements (no DTD): counted, and cut at the budget."""
    head = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url>'
    return head + "<a/>" * ((size - len(head)) // 4) + "</url></urlset>"


def robots_flood(size: int = 4 * MB) -> str:
    """A robots.txt of hundreds of thousands of rules (each URL of a crawl is matched against them)."""
    lines = ["User-agent: *"] + [f"Disallow: /p{i}*x$" for i in range(size // 16)]
    return "\n".join(lines) + "\n"


def llms_flood(links: int = 100_000) -> str:
    return "# Links\n\n" + "".join(f"- [page {i}](/p/{i})\n" for i in range(links))


# ---------------------------------------------------------------- files of the parser registry


def _zip(members: dict[str, bytes | str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return out.getvalue()


def _replace_member(archive: bytes, member: str, content: bytes | str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for info in source.infolist():
            bomb.writestr(info, content if info.filename == member else source.read(info))
    return out.getvalue()


def docx_laughs() -> bytes:
    import docx

    document = docx.Document()
    document.add_paragraph("x")
    out = io.BytesIO()
    document.save(out)
    body = (
        '<?xml version="1.0"?>' + XML_LAUGHS.replace("lolz", "w:document") + '<w:document xmlns:w="http://schemas.'
        'openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body>'
        "</w:document>"
    )
    return _replace_member(out.getvalue(), "word/document.xml", body)


def pptx_laughs() -> bytes:
    import pptx

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    slide.shapes.title.text = "LAUGHS"
    out = io.BytesIO()
    presentation.save(out)
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as archive:
        xml = archive.read("ppt/slides/slide1.xml").decode()
    declaration, _, rest = xml.partition("?>")
    laughs = declaration + "?>" + XML_LAUGHS.replace("lolz", "p:sld") + rest.replace("LAUGHS", "&lol9;")
    return _replace_member(out.getvalue(), "ppt/slides/slide1.xml", laughs)


def xlsx_far_cell() -> bytes:
    """A workbook whose one sheet has a cell in its last row and column: read as 17 billion cells."""
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet["A1"] = "first"
    sheet["XFD1048576"] = "last"
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def epub_laughs() -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("laughs")
    book.set_title("Laughs")
    chapter = epub.EpubHtml(title="One", file_name="chap.xhtml", content="<h1>One</h1><p>LAUGHS</p>")
    book.add_item(chapter)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    out = io.BytesIO()
    epub.write_epub(out, book)
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as archive:
        xml = archive.read("EPUB/chap.xhtml").decode()
    declaration, _, rest = xml.partition("?>")
    laughs = declaration + "?>" + XML_LAUGHS.replace("lolz", "html") + rest.replace("LAUGHS", "&lol9;")
    return _replace_member(out.getvalue(), "EPUB/chap.xhtml", laughs)


def odt_laughs() -> bytes:
    content = (
        '<?xml version="1.0" encoding="UTF-8"?>' + XML_LAUGHS.replace("lolz", "office:document-content") + ""
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2">'
        "<office:body><office:text><text:p>&lol9;</text:p></office:text></office:body></office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
        '<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>'
    )
    return _zip(
        {
            "mimetype": "application/vnd.oasis.opendocument.text",
            "content.xml": content,
            "META-INF/manifest.xml": manifest,
        }
    )


def pdf_inflating(inflated: int = 300 * MB) -> bytes:
    """A one-page PDF whose content stream is ~300 KB of deflated zeros that inflates to 300 MB."""
    import zlib

    compressor = zlib.compressobj(9)
    block = b" " * MB
    stream = b"".join(compressor.compress(block) for _ in range(inflated // MB)) + compressor.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    out, offsets = io.BytesIO(), []
    out.write(b"%PDF-1.4\n")
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def rtf_nested(depth: int = 200_000) -> bytes:
    return b"{\\rtf1\\ansi " + b"{\\b " * depth + b"deep" + b"}" * depth + b"}"


def csv_padding(width: int = 20_000, separator: str = ",") -> bytes:
    """One row of `width` separators, then `width` short rows: each padded to the widest, 4e8 cells."""
    return (separator * width + "x\n" + "a\n" * width).encode()


def html_nested(depth: int = 100_000) -> bytes:
    return ("<html><body>" + "<div>" * depth + "deep" + "</div>" * depth + "</body></html>").encode()


def html_flat_blocks(blocks: int = 40_000) -> bytes:
    """Many sibling blocks, each matched against the main-content text (was quadratic)."""
    return (
        "<html><body>"
        + "".join(f"<div>entry {i} of the harbour ledger, tide {i * 7}</div>" for i in range(blocks))
        + "</body></html>"
    ).encode()


def json_nested(depth: int = 200_000) -> bytes:
    return b"[" * depth + b"]" * depth


def toml_nested(depth: int = 50_000) -> bytes:
    return b"a = " + b"[" * depth + b"]" * depth + b"\n"


def text_link_storm(size: int = 5 * MB) -> bytes:
    """A markdown file of unclosed links and headings (the patterns that used to backtrack)."""
    return (("[a](" * 1000 + "\n# " + " " * 1000 + "x\n") * (size // 6000)).encode()


@contextmanager
def address_space(headroom_mb: int) -> Iterator[None]:
    """Lower this process's soft RLIMIT_AS to what it maps now plus `headroom_mb` (the hard limit is
    kept, so it is restored after): code that expands a bomb fails with MemoryError here."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = rss_kb("VmSize") * 1024 + headroom_mb * MB
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


# ---------------------------------------------------------------- git


def delta_fan_pack(file: Any, levels: int = 120, size: int = 16 * MB) -> tuple[list[tuple[bytes, int, int]], bytes]:
    """A pack of one `size`-byte blob under `levels` levels of two-child deltas, streamed into `file`
    (about 110 KB for 16 MB and 120 levels): each level's two blobs copy their parent's first bytes and
    end in 8 of their own; the second is the parent of the next level. A resolver that keeps every
    pending base holds `levels` blobs at once. Written as OFS_DELTA entries with dulwich's headers, the
    blobs' ids hashed from one shared prefix (never whole in memory). Returns the index entries (binary
    id, offset, CRC-32; for dulwich's `write_pack_index`) and the pack's checksum."""
    from dulwich.object_format import DEFAULT_OBJECT_FORMAT
    from dulwich.objects import Blob
    from dulwich.pack import OFS_DELTA, _delta_encode_size, _encode_copy_operation, pack_object_header

    prefix, step = size - 8, 0x10000  # a copy operation moves at most 64 KB
    stem = hashlib.sha1(b"blob %d\0" % size)  # noqa: S324 - git's ids
    stem.update(b"\0" * prefix)
    copies = b"".join(_encode_copy_operation(start, min(step, prefix - start)) for start in range(0, prefix, step))
    trailer = hashlib.sha1()  # noqa: S324 - the pack's checksum
    entries: list[tuple[bytes, int, int]] = []

    def write(data: bytes) -> None:
        trailer.update(data)
        file.write(data)

    def entry(suffix: bytes, base: int | None, offset: int) -> int:
        if base is None:
            compressor = zlib.compressobj(9)
            data = compressor.compress(b"\0" * prefix) + compressor.compress(suffix) + compressor.flush()
            header = pack_object_header(Blob.type_num, None, size, DEFAULT_OBJECT_FORMAT)
        else:
            delta = _delta_encode_size(size) * 2 + copies + bytes([8]) + suffix
            data = zlib.compress(delta, 9)
            header = pack_object_header(OFS_DELTA, offset - base, len(delta), DEFAULT_OBJECT_FORMAT)
        body = bytes(header) + data
        write(body)
        digest = stem.copy()
        digest.update(suffix)
        entries.append((digest.digest(), offset, zlib.crc32(body)))
        return offset + len(body)

    write(b"PACK" + (2).to_bytes(4, "big") + (1 + 2 * levels).to_bytes(4, "big"))
    parent, offset = 12, entry(b"root0000", None, 12)
    for level in range(levels):
        for side in (0, 1):
            start = offset
            offset = entry(b"%05d-%d." % (level, side), parent, offset)
        parent = start
    checksum = trailer.digest()
    file.write(checksum)
    return entries, checksum


# ---------------------------------------------------------------- code symbols


def python_symbol_flood(count: int = 150_000) -> str:
    """A Python file of `count` one-line functions: more symbols than one file may keep (~3 MB)."""
    return "".join(f"def f{i}(): g{i}\n" for i in range(count))


def minified_line(size: int = 5 * MB) -> str:
    """A minified bundle: one 5 MB line of short identifiers, over the symbol budget's input size."""
    unit = "var a=b(c,d);"
    return unit * (size // len(unit) + 1)
