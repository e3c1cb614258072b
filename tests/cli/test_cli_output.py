"""What the command line shows when things go right (issue 28): a folder's ingest names every file it
skipped or could not read and keeps the PDF parser's complaints off the terminal; a second ingest counts
new, updated and unchanged documents; a search hit shows the words that matched (not the chunk's first
characters cut mid-word) under its heading path."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.test_cli import archivist, cli_env

FILLER = " ".join(f"Keepers logged weather, ships and supplies in ledger {i}." for i in range(14))


def broken_pdf(path: Path) -> None:
    """A two-page PDF whose startxref pointer is wrong: readable, but pypdf warns about it."""
    from fpdf import FPDF

    pdf = FPDF()
    for text in ("Keepers trimmed the wick every night.", "Fog signals sounded every minute."):
        pdf.add_page()
        pdf.set_font("helvetica", size=12)
        pdf.multi_cell(0, 10, text)
    data = bytearray(pdf.output())
    start = data.find(b"\n", data.rfind(b"startxref")) + 1
    data[start : data.find(b"\n", start)] = b"99999"
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def kb(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return cli_env(DATABASE_URL=database_url, ARCHIVIST_ALLOWED_PATHS=str(tmp_path_factory.mktemp("allowed")))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("lighthouse")
    (folder / "lenses.md").write_text(
        f"# Lighthouses\n\n## Lenses\n\n{FILLER} The Fresnel lens bends the beam with concentric prisms, "
        "so a small flame reaches sailors far away.\n"
    )
    broken_pdf(folder / "logbook.pdf")
    (folder / "damaged.docx").write_bytes(b"not a zip archive")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    return folder


def test_folder_ingest_names_skipped_and_failed_files_quietly(kb: dict[str, str], folder: Path) -> None:
    done = archivist("ingest", str(folder), "--source", "Lighthouse", env=kb, process=True)  # the parser's own stderr
    assert "Lighthouse: 2 new, 0 updated, 0 unchanged, 1 failed, 1 skipped" in done.stdout, done.stdout
    assert f"failed: {folder / 'damaged.docx'}:" in done.stderr, done.stderr
    assert f"skipped: {folder / 'photo.png'} (unsupported type)" in done.stderr, done.stderr
    assert "startxref" not in done.stderr and "Object Streams" not in done.stderr, done.stderr
    again = archivist("ingest", str(folder), "--source", "Lighthouse", env=kb)
    assert "Lighthouse: 0 new, 0 updated, 2 unchanged, 1 failed, 1 skipped" in again.stdout, again.stdout
    (folder / "lenses.md").write_text((folder / "lenses.md").read_text() + "\nA clockwork turned the lens.\n")
    third = archivist("ingest", str(folder / "lenses.md"), "--source", "Lighthouse", env=kb)
    assert "Lighthouse: 0 new, 1 updated, 0 unchanged, 0 failed, 0 skipped" in third.stdout, third.stdout


def test_search_shows_the_match_under_its_heading_path(kb: dict[str, str], folder: Path) -> None:
    archivist("ingest", str(folder / "lenses.md"), "--source", "Lighthouse", env=kb)
    done = archivist("search", "Fresnel prisms", "--source", "Lighthouse", "--type", "keyword", "-k", "1", env=kb)
    label, *rest = done.stdout.splitlines()
    assert re.fullmatch(r"1\. \[\d\.\d{3}\] Lighthouses › Lenses", label), label
    shown = rest[-1].strip()
    assert "Fresnel lens bends the beam with concentric prisms" in shown, shown
    source_words = set((folder / "lenses.md").read_text().split())
    first, last = shown.removeprefix("…").split()[0], shown.removesuffix("…").split()[-1]
    assert first in source_words and last in source_words, shown  # cut at whole words
    assert "(chunk" not in done.stdout
