"""The page pipeline's noindex step: robots meta tags, and generated index / search pages that point
their own `<link rel="index">` or `<link rel="search">` at themselves (Sphinx's genindex and search)."""

from __future__ import annotations

import pytest

from services.pages import extract_html

URL = "http://127.0.0.1:8000/docs/genindex.html"


def page(head: str, body: str = "<main><h1>Index</h1><p>alpha, beta, gamma</p></main>") -> str:
    return f"<html><head><title>Index</title>{head}</head><body>{body}</body></html>"


@pytest.mark.parametrize(
    ("head", "url", "noindex", "nofollow"),
    [
        ('<link rel="index" title="Index" href="#" />', URL, "generated index or search page", False),
        ('<link rel="search" title="Search" href="#" />', URL, "generated index or search page", False),
        ('<link rel="index" href="genindex.html" />', URL, "generated index or search page", False),
        ('<link rel="index" href="http://127.0.0.1:8000/docs/genindex.html#top" />', URL, "generated", False),
        (
            '<link rel="index" href="genindex.html" /><link rel="search" href="search.html" />',
            "http://127.0.0.1:8000/docs/intro.html",
            None,
            False,
        ),  # fmt: skip
        ('<meta name="robots" content="noindex, follow">', URL, "robots meta tag", False),
        ('<meta name="ROBOTS" content="NONE">', URL, "robots meta tag", True),
        ('<meta name="robots" content="index, nofollow">', URL, None, True),
        ('<meta name="description" content="noindex">', "http://127.0.0.1:8000/docs/intro.html", None, False),
    ],
)
def test_noindex_and_nofollow(head: str, url: str, noindex: str | None, nofollow: bool) -> None:
    extracted = extract_html(page(head, '<main><h1>Index</h1><p><a href="a.html">alpha</a></p></main>'), url)
    found = extracted.metadata.get("noindex")
    assert (found is None) if noindex is None else (found is not None and found.startswith(noindex))
    assert bool(extracted.metadata.get("nofollow")) is nofollow
    assert extracted.links == ["http://127.0.0.1:8000/docs/a.html"]  # links are read either way


def test_a_file_without_url_is_judged_by_its_own_markup() -> None:
    assert extract_html(page('<link rel="index" href="#">')).metadata["noindex"]
    assert "noindex" not in extract_html(page('<link rel="index" href="genindex.html">')).metadata
