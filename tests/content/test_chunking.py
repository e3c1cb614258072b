"""Tests for the markdown-aware chunker (pure functions, no database)."""

from __future__ import annotations

import random
import string
import time

import pytest

from services.chunking import MarkdownChunker, get_chunker
from services.chunking.base import Chunk
from services.core.errors import InvalidArgument
from services.core.settings import Settings, get_settings

WORDS = ["alpha", "beta", "gamma", "naïve", "café", "数据", "日本語の文。", "Ωmega", "x", "e.g.", "1.", "—", "🙂"]


def random_markdown(rng: random.Random, size: int) -> str:
    """A messy markdown document: headings, fences with `#` lines, long and unpunctuated text, unicode."""
    parts: list[str] = []
    length = 0
    while length < size:
        roll = rng.random()
        if roll < 0.1:
            part = "#" * rng.randint(1, 6) + " " + " ".join(rng.choices(WORDS, k=3)) + "\n"
        elif roll < 0.2:
            fence = rng.choice(["```", "~~~", "````"])
            lines = ["# " + " ".join(rng.choices(WORDS, k=rng.randint(0, 12))) for _ in range(rng.randint(1, 60))]
            part = fence + "python\n" + "\n".join(lines) + "\n" + fence + "\n"
        elif roll < 0.3:
            part = "".join(rng.choices(string.ascii_letters, k=rng.randint(100, 3000))) + "\n"
        elif roll < 0.4:
            part = " ".join(rng.choices(WORDS, k=rng.randint(50, 600))) + "\n"
        elif roll < 0.5:
            part = "\n" * rng.randint(1, 5) + " " * rng.randint(0, 300) + "\t\r\n"
        else:
            sentences = [
                " ".join(rng.choices(WORDS, k=rng.randint(3, 30))).capitalize() + rng.choice([".", "!", "?", "", "。"])
                for _ in range(rng.randint(1, 12))
            ]
            part = " ".join(sentences) + "\n\n"
        parts.append(part)
        length += len(part)
    return "".join(parts)


def assert_invariants(content: str, chunks: list[Chunk], chunker: MarkdownChunker) -> None:
    """Offsets exact, trimmed, ordered, within 1.5x chunk_size, and every non-blank char covered."""
    covered = bytearray(len(content))
    previous_start = -1
    for chunk in chunks:
        assert content[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.text.strip(), "empty chunk"
        assert not chunk.text[0].isspace() and not chunk.text[-1].isspace()
        assert chunk.char_start > previous_start
        assert len(chunk.text) <= chunker.chunk_size * 1.5
        previous_start = chunk.char_start
        covered[chunk.char_start : chunk.char_end] = b"\x01" * (chunk.char_end - chunk.char_start)
    uncovered = [i for i, char in enumerate(content) if not char.isspace() and not covered[i]]
    assert uncovered == []


def chunk_containing(chunks: list[Chunk], needle: str) -> Chunk:
    """The first chunk whose text contains needle."""
    return next(chunk for chunk in chunks if needle in chunk.text)


# --- invariants ----------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "   ", "\n\n\t \r\n"])
def test_blank_content_gives_no_chunks(content: str) -> None:
    assert MarkdownChunker().chunk(content) == []


def test_short_document_is_one_chunk_without_surrounding_whitespace() -> None:
    content = "\n\n  Hello world.  \n"
    chunks = MarkdownChunker().chunk(content)
    assert [(c.text, c.char_start, c.char_end, c.heading_path) for c in chunks] == [("Hello world.", 4, 16, [])]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(("size", "overlap"), [(1000, 150), (200, 50), (50, 49), (300, 0), (5, 2), (1, 0)])
def test_invariants_on_random_markdown(seed: int, size: int, overlap: int) -> None:
    rng = random.Random(seed * 1000 + size)
    content = random_markdown(rng, rng.randint(1, 15_000))
    chunker = MarkdownChunker(size, overlap)
    chunks = chunker.chunk(content)
    assert chunks
    assert_invariants(content, chunks, chunker)


@pytest.mark.parametrize("mode", ["text", "code"])
def test_invariants_in_text_and_code_modes(mode: str) -> None:
    content = random_markdown(random.Random(99), 20_000)
    chunker = MarkdownChunker(400, 80, mode=mode)
    assert_invariants(content, chunker.chunk(content), chunker)


def test_crlf_line_endings_keep_offsets_and_headings() -> None:
    content = "# Title\r\n\r\nIntro text here.\r\n\r\n## Part\r\n\r\nPart text." + " More words." * 10
    chunker = MarkdownChunker(100, 20)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    assert chunks[0].heading_path == ["Title"]
    assert chunk_containing(chunks, "## Part").heading_path == ["Title", "Part"]


# --- headings ------------------------------------------------------------------------------------

HEADED_DOC = """Preamble before any heading.

# Install

Intro to installing.

## Linux

Use the package manager.

### Debian

Run apt-get install archivist.

## macOS ##

Use brew install archivist.

```bash
# this is a shell comment, not a heading
brew install archivist
```

# Usage

Run archivist serve.
"""


def test_heading_paths_follow_the_heading_hierarchy() -> None:
    chunks = MarkdownChunker(1000, 150).chunk(HEADED_DOC)
    paths = {chunk.text.split("\n")[0]: chunk.heading_path for chunk in chunks}
    assert paths == {
        "Preamble before any heading.": [],
        "# Install": ["Install"],
        "## Linux": ["Install", "Linux"],
        "### Debian": ["Install", "Linux", "Debian"],
        "## macOS ##": ["Install", "macOS"],
        "# Usage": ["Usage"],
    }
    assert chunk_containing(chunks, "shell comment").heading_path == ["Install", "macOS"]


def test_chunks_never_cross_a_section_boundary() -> None:
    chunks = MarkdownChunker(40, 30).chunk(HEADED_DOC)
    headings = ["# Install", "## Linux", "### Debian", "## macOS ##", "# Usage"]
    for chunk in chunks:
        lines = chunk.text.split("\n")
        assert not any(line in headings for line in lines[1:]), chunk.text
    first_lines = [chunk.text.split("\n")[0] for chunk in chunks]
    assert [line for line in first_lines if line in headings] == headings


def test_heading_only_section_is_merged_into_its_subsection() -> None:
    content = "# Install\n\n## Linux\n\nUse the package manager.\n\n## Windows\n\nUse the installer.\n"
    chunks = MarkdownChunker().chunk(content)
    assert [(c.text, c.heading_path) for c in chunks] == [
        ("# Install\n\n## Linux\n\nUse the package manager.", ["Install", "Linux"]),
        ("## Windows\n\nUse the installer.", ["Install", "Windows"]),
    ]


def test_hash_lines_are_not_headings_in_code_mode() -> None:
    content = "# comment one\nx = 1\n\n# comment two\ny = 2\n"
    chunks = MarkdownChunker(mode="code").chunk(content)
    assert [(c.text, c.heading_path) for c in chunks] == [(content.strip(), [])]


# --- code fences ---------------------------------------------------------------------------------


def _code_block(lines: int, fence: str = "```") -> str:
    body = "\n".join(f"    value_{i} = compute(value_{i - 1})  # step {i}" for i in range(lines))
    return f"{fence}python\n{body}\n{fence}"


def test_code_fence_up_to_one_and_a_half_chunk_sizes_is_kept_whole() -> None:
    block = _code_block(25)  # ~1200 characters
    assert 1000 < len(block) <= 1500
    content = "Some intro sentence. " * 30 + "\n\n" + block + "\n\n" + "Closing remarks here. " * 30
    chunker = MarkdownChunker(1000, 150)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    holders = [chunk for chunk in chunks if "value_0" in chunk.text]
    assert len(holders) == 1
    assert block in holders[0].text
    assert sum("step 12" in chunk.text for chunk in chunks) == 1


def test_tilde_fence_with_heading_like_lines_is_kept_whole() -> None:
    block = "~~~\n# not a heading\n## nor this\n~~~"
    content = "# Real\n\n" + "Text. " * 200 + "\n\n" + block + "\n\nAfter."
    chunks = MarkdownChunker(300, 50).chunk(content)
    assert all(chunk.heading_path == ["Real"] for chunk in chunks)
    assert block in chunk_containing(chunks, "not a heading").text


def test_oversized_code_fence_is_split_at_line_starts() -> None:
    block = _code_block(80)  # ~3900 characters
    content = "# Code\n\n" + block + "\n"
    chunker = MarkdownChunker(1000, 150)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    assert len(chunks) >= 4
    for chunk in chunks:
        line_start = content.rfind("\n", 0, chunk.char_start) + 1
        assert content[line_start : chunk.char_start].strip() == ""  # starts at a line (after indentation)
        assert chunk.char_end == len(content.rstrip()) or content[chunk.char_end] == "\n"
        assert len(chunk.text) <= 1000


# --- sizes and break points ---------------------------------------------------------------------


def test_paragraphs_are_packed_and_cut_at_paragraph_boundaries() -> None:
    paragraphs = [f"Paragraph {i} says something useful. " * 8 for i in range(30)]  # ~300 chars each
    content = "\n\n".join(p.strip() for p in paragraphs)
    chunker = MarkdownChunker(1000, 0)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    assert len(chunks) == 10  # three ~300-char paragraphs per chunk
    for chunk in chunks:
        assert 600 <= len(chunk.text) <= 1000
        assert chunk.text.startswith("Paragraph")
        assert chunk.char_end == len(content) or content[chunk.char_end : chunk.char_end + 2] == "\n\n"


def test_long_paragraph_is_cut_at_sentence_ends() -> None:
    content = " ".join(f"Sentence number {i} has exactly enough words to be typical." for i in range(100))
    chunker = MarkdownChunker(300, 0)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    assert all(chunk.text.endswith("typical.") and chunk.text.startswith("Sentence") for chunk in chunks)
    assert all(150 <= len(chunk.text) <= 300 for chunk in chunks)


def test_list_markers_and_abbreviations_are_not_sentence_ends() -> None:
    items = "\n".join(f"{i}. item text e.g. something here" for i in range(1, 40))
    chunks = MarkdownChunker(200, 0).chunk(items)
    for chunk in chunks:
        assert not chunk.text.endswith(("e.g.", ". 1.")) and not chunk.text.split("\n")[-1].rstrip(".").isdigit()
        assert chunk.text.endswith("something here")


def test_unpunctuated_text_is_cut_between_words() -> None:
    words = [f"word{i}" for i in range(2000)]
    content = " ".join(words)
    chunker = MarkdownChunker(500, 100)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    for chunk in chunks:
        assert all(token in words for token in chunk.text.split(" "))  # no word was cut in half
    assert all(len(chunk.text) <= 500 for chunk in chunks[:-1])
    assert len(chunks[-1].text) <= 750  # a small tail may be merged into the last chunk


def test_text_without_whitespace_is_hard_split_at_chunk_size() -> None:
    content = "a" * 2500
    chunks = MarkdownChunker(1000, 0).chunk(content)
    assert [(c.char_start, c.char_end) for c in chunks] == [(0, 1000), (1000, 2000), (2000, 2500)]


def test_small_trailing_fragment_is_merged_into_previous_chunk() -> None:
    content = "a" * 1100  # a 100-char tail (< 20% of 1000) joins the first chunk: 1100 <= 1500
    chunks = MarkdownChunker(1000, 0).chunk(content)
    assert [(c.char_start, c.char_end) for c in chunks] == [(0, 1100)]


def test_unicode_sentences_are_split_and_offsets_hold() -> None:
    content = "".join(f"これは{i}番目の文です。" for i in range(300)) + " 🙂 café naïve"
    chunker = MarkdownChunker(200, 40)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    assert all(chunk.text.endswith("。") for chunk in chunks[:-1])


# --- overlap -------------------------------------------------------------------------------------


def test_consecutive_chunks_overlap_at_a_sentence_start() -> None:
    content = "# Topic\n\n" + " ".join(f"Fact {i} is stated in this short sentence." for i in range(200))
    chunker = MarkdownChunker(500, 150)
    chunks = chunker.chunk(content)
    assert_invariants(content, chunks, chunker)
    assert chunks[0].char_start == 0
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        overlap = previous.char_end - chunk.char_start
        assert 0 < overlap <= 150
        assert chunk.text.startswith("Fact ")
        assert content[chunk.char_start - 2 : chunk.char_start] == ". "
        assert len(chunk.text) <= 500


def test_overlap_snaps_to_a_word_start_without_sentences() -> None:
    content = " ".join(f"token{i}" for i in range(1000))
    chunks = MarkdownChunker(300, 60).chunk(content)
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        assert 0 < previous.char_end - chunk.char_start <= 60
        assert content[chunk.char_start - 1] == " "


def test_zero_overlap_means_disjoint_chunks() -> None:
    content = " ".join(f"Fact {i} is stated in this short sentence." for i in range(200))
    chunks = MarkdownChunker(500, 0).chunk(content)
    assert all(b.char_start >= a.char_end for a, b in zip(chunks, chunks[1:], strict=False))


def test_first_chunk_of_a_section_has_no_overlap() -> None:
    content = "# A\n\n" + "Alpha sentence here. " * 60 + "\n\n# B\n\n" + "Beta sentence here. " * 60
    chunks = MarkdownChunker(400, 100).chunk(content)
    first_b = next(chunk for chunk in chunks if chunk.heading_path == ["B"])
    assert first_b.text.startswith("# B")
    assert all("Beta" not in chunk.text for chunk in chunks if chunk.heading_path == ["A"])


# --- construction and performance ----------------------------------------------------------------


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (100, 100), (100, -1)])
def test_invalid_sizes_are_rejected(size: int, overlap: int) -> None:
    with pytest.raises(InvalidArgument):
        MarkdownChunker(size, overlap)


def test_get_chunker_uses_settings() -> None:
    chunker = get_chunker(Settings(chunk_size=500, chunk_overlap=50))
    assert isinstance(chunker, MarkdownChunker)
    assert (chunker.chunk_size, chunker.overlap, chunker.mode) == (500, 50, "markdown")
    default = get_chunker()
    assert isinstance(default, MarkdownChunker)
    assert (default.chunk_size, default.overlap) == (get_settings().chunk_size, get_settings().chunk_overlap)


@pytest.mark.parametrize(
    ("document_type", "mode"),
    [("markdown", "markdown"), ("html", "markdown"), ("pdf", "markdown"), ("code", "code"), ("yaml", "code")]
    + [("text", "text"), ("rst", "text"), (None, "markdown")],
)
def test_get_chunker_picks_mode_from_document_type(document_type: str | None, mode: str) -> None:
    chunker = get_chunker(Settings(), document_type=document_type)
    assert isinstance(chunker, MarkdownChunker)
    assert chunker.mode == mode


def test_one_megabyte_chunks_in_well_under_a_second() -> None:
    content = random_markdown(random.Random(2024), 1_000_000)
    assert len(content) >= 1_000_000
    chunker = MarkdownChunker(1000, 150)
    started = time.perf_counter()
    chunks = chunker.chunk(content)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"chunking 1 MB took {elapsed:.2f}s"
    assert 700 <= len(chunks) <= 3000
    assert_invariants(content, chunks, chunker)
