"""Files that cannot hurt (issue 23, build 5), through the real document service and PostgreSQL.

ZIP bombs are refused before they inflate; heavy formats are parsed in a worker limited in memory and
CPU time, off the event loop; hidden files are never read, and a symlink swapped in after the path
check is caught at the moment of reading; over HTTP, no path is readable unless configured.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.access.paths import resolve_allowed_path
from services.access.scope import Scope, use_scope
from services.app import Archivist
from services.core.errors import InvalidArgument, PermissionDenied, Unavailable
from services.core.settings import Settings
from services.documents import DocumentService
from services.documents.reading import ReadingService
from tests.conftest import make_settings

INFLATED = 160 * 1024 * 1024  # what the bombs below inflate to
MB = 1024 * 1024


def docx_bytes(paragraphs: list[str]) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def epub_bytes() -> bytes:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("bomb")
    book.set_title("Bomb")
    chapter = epub.EpubHtml(title="One", file_name="chap.xhtml", content="<h1>One</h1><p>Hello.</p>")
    book.add_item(chapter)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()


def inflate_member(archive: bytes, suffix: str, head: bytes, tail: bytes) -> bytes:
    """`archive` with the member ending in `suffix` replaced by `head`, ~160 MB of paragraphs, `tail`.

    The filler is streamed into the ZIP, so building the bomb never holds 160 MB in memory.
    """
    filler = b"<p>" + b"a" * 1017 + b"</p>"  # 1 KB
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(archive)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as bomb,
    ):
        for member in source.infolist():
            if not member.filename.endswith(suffix):
                bomb.writestr(member, source.read(member))
                continue
            with bomb.open(member.filename, "w", force_zip64=True) as stream:
                stream.write(head)
                block = filler * 1024
                for _ in range(INFLATED // len(block)):
                    stream.write(block)
                stream.write(tail)
    return out.getvalue()


def peak_rss_reset() -> None:
    """Reset this process's peak RSS (VmHWM), so the next reading covers only what follows."""
    Path("/proc/self/clear_refs").write_text("5")


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


BOMBS = {
    "book.epub": lambda: inflate_member(epub_bytes(), "chap.xhtml", b"<html><body>", b"</body></html>"),
    "report.docx": lambda: inflate_member(
        docx_bytes(["x"]),
        "word/document.xml",
        b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        b"<w:body><w:p><w:r><w:t>",
        b"</w:t></w:r></w:p></w:body></w:document>",
    ),
}


@pytest.fixture(scope="module")
async def source_id(app: Archivist) -> Any:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        return (await app.sources.create("Hostile files")).id


@pytest.mark.parametrize("name", list(BOMBS))
@pytest.mark.usefixtures("owner")
async def test_zip_bomb_is_refused_before_it_inflates(
    app: Archivist, source_id: Any, files_dir: Path, name: str
) -> None:
    path = files_dir / name
    path.write_bytes(BOMBS[name]())
    assert path.stat().st_size < 400 * 1024
    peak_rss_reset()
    before = rss_kb("VmRSS")
    started = time.perf_counter()
    with pytest.raises(InvalidArgument) as refused:
        await app.documents.create_from_file(source_id, path)
    took = time.perf_counter() - started
    grew_mb = (rss_kb("VmHWM") - before) / 1024
    assert grew_mb < 20, f"the server grew by {grew_mb:.0f} MB"
    assert took < 2, f"refusing took {took:.1f} s"
    assert "inflates" in refused.value.message and refused.value.suggestion


def limited_service(app: Archivist, database_url: str, files_dir: Path, **limits: Any) -> DocumentService:
    """A document service on the app's database with its own parser limits."""
    settings = make_settings(database_url, files_dir, **limits)
    return DocumentService(app.db, app.sources, app.embedder, settings)


@pytest.mark.usefixtures("owner")
async def test_parse_over_the_memory_limit_costs_only_the_worker(
    app: Archivist, source_id: Any, database_url: str, files_dir: Path
) -> None:
    documents = limited_service(app, database_url, files_dir, parse_memory_mb=96)
    big, small = files_dir / "big.docx", files_dir / "small.docx"
    big.write_bytes(docx_bytes([" ".join(["alpha", "beta", "gamma", "delta"] * 4000)] * 100))  # ~9 MB of text
    small.write_bytes(docx_bytes(["A small memo about the harbour."]))
    with pytest.raises(InvalidArgument) as refused:
        await documents.create_from_file(source_id, big)
    assert "96 MB" in refused.value.message and "ARCHIVIST_PARSE_MEMORY_MB" in refused.value.suggestion
    stored = await documents.create_from_file(source_id, small)  # the server, and a fresh worker, still answer
    assert await ReadingService(app.db).content(stored.document.id) == "A small memo about the harbour."


@pytest.mark.usefixtures("owner")
async def test_parse_over_the_cpu_limit_is_a_retryable_error(
    app: Archivist, source_id: Any, database_url: str, files_dir: Path
) -> None:
    documents = limited_service(app, database_url, files_dir, parse_cpu_seconds=1)
    slow, small = files_dir / "slow.docx", files_dir / "small-too.docx"
    slow.write_bytes(docx_bytes([f"Paragraph {i}." for i in range(6000)]))  # python-docx: ~2 ms each
    small.write_bytes(docx_bytes(["Still here."]))
    with pytest.raises(Unavailable) as stopped:
        await documents.create_from_file(source_id, slow)
    assert stopped.value.retryable and "CPU" in stopped.value.message
    stored = await documents.create_from_file(source_id, small)
    assert await ReadingService(app.db).content(stored.document.id) == "Still here."


@pytest.mark.usefixtures("owner")
async def test_parsing_runs_off_the_event_loop(app: Archivist, source_id: Any, files_dir: Path) -> None:
    path = files_dir / "long.docx"
    # many short paragraphs: python-docx's time goes by paragraph (~2 ms each), the embedding's by text,
    # and only the parsing, the part that could block the loop, needs to be long (well over the 0.4 s)
    path.write_bytes(docx_bytes([f"P{i}." for i in range(600)]))  # ~1-3 s of parsing
    gaps: list[float] = []

    async def tick() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)  # the ticker is running before the file is read
    started = time.perf_counter()
    try:
        await app.documents.create_from_file(source_id, path)
    finally:
        ticker.cancel()
    assert time.perf_counter() - started > 0.5  # long enough for a blocked loop to show
    assert max(gaps) < 0.4, f"the event loop stalled for {max(gaps):.1f} s"


#: A fresh Python's first isolated parse, with a ticker on its event loop: prints the longest gap between
#: ticks. Fresh, because the first parse in a process is the one that starts the forkserver (it imports
#: its preload before it forks a worker); in the suite, an earlier test has usually started it already.
FIRST_PARSE = """
import asyncio, sys, time
from pathlib import Path
from services.core.settings import Settings
from services.parsers.isolation import parse_file

async def main():
    gaps = []
    async def tick():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now
    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0.05)
    path = Path(sys.argv[1])
    await parse_file(path.read_bytes(), path, Settings(_env_file=None))
    ticker.cancel()
    print(max(gaps))

asyncio.run(main())
"""


async def test_the_first_isolated_parse_leaves_the_event_loop_running(tmp_path: Path) -> None:
    """Starting the parser pool (the forkserver and its first worker) happens off the event loop: it
    stopped the loop for 0.6-1.8 s when the pool was started from it."""
    path = tmp_path / "short.docx"
    path.write_bytes(docx_bytes(["One paragraph."]))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FIRST_PARSE, str(path), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    assert float(out) < 0.4, f"the event loop stalled for {float(out):.1f} s while the parser pool started"


@pytest.fixture
def secrets(files_dir: Path) -> Iterator[dict[str, Path]]:
    (files_dir / ".git").mkdir(exist_ok=True)
    paths = {
        ".env": files_dir / ".env",
        ".git/config": files_dir / ".git" / "config",
        "link-to-env.md": files_dir / "link-to-env.md",
    }
    paths[".env"].write_text("DATABASE_URL=postgresql://admin:hunter2@db/prod\n")
    paths[".git/config"].write_text("[remote]\n\turl = https://token@example.com/repo\n")
    paths["link-to-env.md"].unlink(missing_ok=True)
    paths["link-to-env.md"].symlink_to(paths[".env"])
    yield paths


@pytest.mark.parametrize("name", [".env", ".git/config", "link-to-env.md"])
@pytest.mark.usefixtures("owner")
async def test_hidden_files_are_refused_when_named(
    app: Archivist, source_id: Any, secrets: dict[str, Path], name: str
) -> None:
    with pytest.raises(PermissionDenied) as refused:
        await app.documents.create_from_file(source_id, secrets[name])
    assert "hidden" in refused.value.message and "hunter2" not in refused.value.message


def test_symlink_swapped_after_the_check_is_not_read(files_dir: Path, tmp_path: Path) -> None:
    from services.access.paths import read_allowed_file  # imported here so the module loads on older code too

    outside = tmp_path / "outside-secret.md"
    outside.write_text("the salaries\n")
    notes = files_dir / "notes.md"
    notes.write_text("# Notes\n")
    checked = resolve_allowed_path(str(notes), [files_dir])
    notes.unlink()
    notes.symlink_to(outside)  # swapped between the check and the read
    with pytest.raises(PermissionDenied):
        read_allowed_file(checked, [files_dir], MB)
    notes.unlink()
    notes.write_text("# Notes\n")
    assert read_allowed_file(checked, [files_dir], MB) == b"# Notes\n"


def test_a_directory_swapped_for_a_symlink_is_caught_on_the_opened_file(files_dir: Path, tmp_path: Path) -> None:
    from services.access.paths import read_allowed_file

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "page.md").write_text("not yours\n")
    folder = files_dir / "folder"
    folder.mkdir(exist_ok=True)
    (folder / "page.md").write_text("yours\n")
    checked = resolve_allowed_path(str(folder / "page.md"), [files_dir])
    os.rename(folder, files_dir / "folder-moved")
    folder.symlink_to(tmp_path / "elsewhere")  # an inner directory now points outside
    with pytest.raises(PermissionDenied):
        read_allowed_file(checked, [files_dir], MB)


def test_http_serves_no_files_unless_paths_are_configured(monkeypatch: pytest.MonkeyPatch, files_dir: Path) -> None:
    monkeypatch.delenv("ARCHIVIST_ALLOWED_PATHS", raising=False)
    assert Settings(_env_file=None).allowed_paths == [Path.cwd()]  # stdio and the CLI keep the working directory
    http = Settings(_env_file=None).for_http()
    assert http.allowed_paths == []
    with pytest.raises(PermissionDenied) as refused:
        resolve_allowed_path(str(files_dir / "small.docx"), http.allowed_paths)
    assert "ARCHIVIST_ALLOWED_PATHS" in refused.value.suggestion
    monkeypatch.setenv("ARCHIVIST_ALLOWED_PATHS", str(files_dir))
    assert Settings(_env_file=None).for_http().allowed_paths == [files_dir]
    assert Settings(_env_file=None, allowed_paths=[files_dir]).for_http().allowed_paths == [files_dir]
