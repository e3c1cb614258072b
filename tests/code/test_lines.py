"""The line index's blocks (services/code/lines.py): lines as the file reads them, small rows, and a
minified 5 MB line stored as overlapping pieces in rows of bounded size, every short match kept whole."""

from __future__ import annotations

from services.code.lines import LINE_CAP, PIECE_OVERLAP, blocks, indexed, segments, split_lines


def test_lines_are_the_files_lines() -> None:
    assert split_lines("a\r\nb\n\nc\n") == ["a", "b", "", "c"]
    assert split_lines("no newline") == ["no newline"]
    text = "".join(f"line {i}\n" for i in range(1, 2001))
    rebuilt = [line for a, b, t in blocks(text) for _, line in segments(a, b, t)]
    assert rebuilt == split_lines(text)
    assert all(len(t) <= 4096 + 100 for _, _, t in blocks(text))


def test_a_minified_5mb_line_is_kept_in_bounded_rows_and_every_short_match_whole() -> None:
    unit = "var a=1;"
    line = unit * (5 * 1024 * 1024 // len(unit))
    step = LINE_CAP - PIECE_OVERLAP
    marker = "needle" * 80  # 480 characters, across the border of the first two pieces
    line = line[: step - 100] + marker + line[step - 100 + len(marker) :]
    rows = list(blocks("first\n" + line + "\nlast\n"))
    assert rows[0] == (1, 1, "first") and rows[-1] == (3, 3, "last")
    long_rows = rows[1:-1]
    assert {(a, b) for a, b, _ in long_rows} == {(2, 2)} and max(len(t) for _, _, t in long_rows) <= 70_000
    pieces = [p for _, _, t in long_rows for p in t.split("\n")]
    assert any(marker in p for p in pieces)
    assert "".join(p if i == 0 else p[PIECE_OVERLAP:] for i, p in enumerate(pieces)) == line


def test_only_files_read_verbatim_are_indexed() -> None:
    assert indexed({"path": "src/app.py"}) and indexed({"path": "README.md"}) and indexed({"path": "Makefile"})
    assert not indexed({"path": "data.csv"}) and not indexed({"path": "guide.pdf"}) and not indexed({})
    assert not indexed({"path": "page.html"})
