"""What the linear-time rewrites of issue 23 (tests/security/test_linear_text.py) must keep meaning:
robots.txt wildcards, llms.txt links, ATX headings, titles and the markdown guess."""

from __future__ import annotations

import pytest

from services.chunking.layout import parse_heading
from services.documents.reading import parse_outline
from services.documents.text import guess_text_type, guess_title
from services.net.robots import RobotsPolicy, parse_llms_txt
from services.pages.pipeline import markdown_title as page_title


@pytest.mark.parametrize(
    ("rule", "path", "allowed"),
    [
        ("/private", "/private/x", False),
        ("/*.pdf$", "/a/b.pdf", False),
        ("/*.pdf$", "/a/b.pdf?x=1", True),
        ("/a*b*c", "/a--b--c--", False),
        ("/a*b*c", "/a--c--b", True),
        ("/fish$", "/fish", False),
        ("/fish$", "/fishes", True),
        ("/%2A", "/*", False),
    ],
)
def test_robots_wildcards_still_mean_the_same(rule: str, path: str, allowed: bool) -> None:
    policy = RobotsPolicy(f"User-agent: *\nDisallow: {rule}\n", "ArchivistBot")
    assert policy.can_fetch("https://example.com" + path) is allowed


def test_llms_txt_links_still_found() -> None:
    text = '# Docs\n- [Intro](/intro "The intro")\n- [see [nested](https://example.com/n)]\n[[x]](/y)'
    assert parse_llms_txt(text, "https://example.com/") == ["https://example.com/intro", "https://example.com/n"]


def test_headings_still_parse() -> None:
    assert parse_heading("## Setup ##") == (2, "Setup")
    assert parse_heading("# C#") == (1, "C#")
    assert parse_heading("#hashtag") is None
    assert parse_heading("    # code") is None
    assert guess_title("intro\n\n# The Title #\n") == "The Title"
    assert page_title("### three\n## Two\n") == "Two"
    assert [h.text for h in parse_outline("# A\n```\n# not\n```\n## B ##\n")] == ["A", "B"]
    assert guess_text_type("see [the docs](https://example.com)") == "markdown"
    assert guess_text_type("plain words [1] and (2)") == "text"
