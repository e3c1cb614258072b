"""Main-content extraction compared on real documentation pages (Debian packages, read from disk).

    .venv/bin/python bench/extraction.py [--pages 40] [--out bench/.cache/extraction.json]

For each doc set, a fixed sample of pages; for each page a reference split by the generator's own
markup, written here independently of services/pages: the article (PostgreSQL/DocBook: the body's
children but the navheader/navfooter tables; Django/Sphinx: `#yui-main`; MkDocs: `div[role=main]`;
permalink "¶" anchors removed) and its chrome (the rest of <body>). Per method: recall = share of the
article's words in the output, precision = share of the output's words that are article words,
headings = share of the article's headings found in the output, chrome = share of chrome lines
(not also article text) leaked into the output, ms = mean extraction time. Nothing is installed:
a missing doc set is reported with the apt package that provides it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import lxml.html

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from services.pages import extract_html  # noqa: E402
from services.pages.main_content import guided_body  # noqa: E402
from services.pages.markdown import element_to_markdown  # noqa: E402
from services.pages.parse import parse_html  # noqa: E402
from services.pages.sanitize import remove_chrome  # noqa: E402

DOC_SETS = {
    "postgresql (DocBook)": ("postgresql-doc-15", Path("/usr/share/doc/postgresql-doc-15/html")),
    "django (Sphinx)": ("python-django-doc", Path("/usr/share/doc/python-django-doc/html")),
    "mkdocs (MkDocs)": ("mkdocs-doc", Path("/usr/share/doc/mkdocs/html")),
}
_WORD = re.compile(r"\w+")


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def norm(text: str) -> str:
    """Lower-cased words joined by single spaces (markup and punctuation ignored)."""
    return " " + " ".join(_WORD.findall(text.lower())) + " "


def reference(html: str, set_name: str) -> tuple[str, list[str], list[str]] | None:
    """(article text, article headings, chrome lines) from the generator's own layout."""
    tree = parse_html(html)
    if tree is None:
        return None
    body = tree.find("body")
    if body is None:
        return None
    for anchor in tree.xpath("//a[contains(concat(' ', @class, ' '), ' headerlink ')]"):
        anchor.drop_tree()
    for script in tree.xpath("//script|//style|//noscript"):
        script.drop_tree()
    if set_name.startswith("postgresql"):
        article = [c for c in body if isinstance(c.tag, str) and c.get("class") not in {"navheader", "navfooter"}]
    elif set_name.startswith("django"):
        article = tree.xpath("//*[@id='yui-main']")
    else:
        article = tree.xpath("//div[@role='main']")
    if not article:
        return None
    text = " ".join(" ".join(a.text_content().split()) for a in article)
    headings = [" ".join(h.text_content().split()) for a in article for h in a.xpath(".//h1|.//h2|.//h3|.//h4")]
    for a in article:
        a.drop_tree()
    chrome = [" ".join(line.split()) for line in body.text_content().splitlines()]
    article_words = norm(text)
    chrome = [line for line in chrome if len(line.split()) >= 2 and norm(line) not in article_words]
    return text, [h for h in headings if h], chrome


def ours(html: str, url: str) -> str:
    return extract_html(html, url).markdown


def ours_body_only(html: str, url: str) -> str:
    """Our sanitizer + converter on <body>, no generator rule: what a page no rule fits gets."""
    body = parse_html(html).find("body")
    remove_chrome(body, page_frame=True)
    return element_to_markdown(body)


def ours_fallback(html: str, url: str) -> str:
    """What a page no generator rule fits gets: <body> pruned to resiliparse's main content."""
    main, _ = guided_body(parse_html(html), html)
    remove_chrome(main, page_frame=True)
    return element_to_markdown(main)


def readability_lxml(html: str, url: str) -> str:
    from readability import Document

    summary = Document(html).summary(html_partial=True)
    return element_to_markdown(lxml.html.fragment_fromstring(summary, create_parent="div"))


def trafilatura_md(html: str, url: str) -> str:
    import trafilatura

    return trafilatura.extract(html, url=url, output_format="markdown", include_tables=True,
                               include_formatting=True, include_comments=False) or ""  # fmt: skip


def resiliparse_main(html: str, url: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text

    return extract_plain_text(html, main_content=True, preserve_formatting=True, alt_texts=False)


def inscriptis_text(html: str, url: str) -> str:
    from inscriptis import get_text

    return get_text(html)


def crawl4ai_pruning(html: str, url: str) -> str:
    from crawl4ai.content_filter_strategy import PruningContentFilter

    parts = PruningContentFilter().filter_content(html)
    return element_to_markdown(lxml.html.fragment_fromstring("".join(parts), create_parent="div"))


def crawl4ai_default(html: str, url: str) -> str:
    """The extraction before this change: crawl4ai's scraping strategy + default markdown, whole page."""
    from crawl4ai.content_scraping_strategy import LXMLWebScrapingStrategy
    from crawl4ai.markdown_generation_strategy import DefaultMarkdownGenerator

    scraped = LXMLWebScrapingStrategy().scrap(url, html)
    generator = DefaultMarkdownGenerator(options={"single_line_break": False})
    return generator.generate_markdown(input_html=scraped.cleaned_html, base_url=url, citations=False).raw_markdown


METHODS: dict[str, Callable[[str, str], str]] = {
    "services.pages (selected)": ours,
    "services.pages, no generator rule: body": ours_body_only,
    "services.pages, no generator rule: body pruned by resiliparse (fallback)": ours_fallback,
    "readability-lxml": readability_lxml,
    "trafilatura (markdown)": trafilatura_md,
    "resiliparse main_content": resiliparse_main,
    "crawl4ai PruningContentFilter": crawl4ai_pruning,
    "inscriptis (no boilerplate removal)": inscriptis_text,
    "crawl4ai default markdown (before)": crawl4ai_default,
}


def sample(directory: Path, count: int) -> list[Path]:
    pages = sorted(p for p in directory.rglob("*.html") if "_modules" not in p.parts and "genindex" not in p.name)
    step = max(1, len(pages) // count)
    return pages[::step][:count]


def score(output: str, ref: tuple[str, list[str], list[str]]) -> dict[str, float]:
    text, headings, chrome = ref
    out_words, ref_words = words(output), words(text)
    common = sum((out_words & ref_words).values())
    flat = norm(output)
    return {
        "recall": common / max(1, sum(ref_words.values())),
        "precision": common / max(1, sum(out_words.values())),
        "headings": sum(1 for h in headings if norm(h) in flat) / len(headings) if headings else 1.0,
        "chrome": sum(1 for c in chrome if norm(c) in flat) / len(chrome) if chrome else 0.0,
        "chars_ratio": len(output) / max(1, len(text)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=40, help="pages per doc set")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/.cache/extraction.json")
    args = parser.parse_args()
    results: dict[str, dict[str, dict[str, float]]] = {}
    for set_name, (package, directory) in DOC_SETS.items():
        if not directory.is_dir():
            print(f"{set_name}: missing; install it with: apt-get install {package}", file=sys.stderr)
            continue
        pages = [(p, p.read_text(encoding="utf-8", errors="replace")) for p in sample(directory, args.pages)]
        refs = [(p, html, reference(html, set_name)) for p, html in pages]
        refs = [(p, html, r) for p, html, r in refs if r is not None and r[0]]
        for method, run in METHODS.items():
            rows, times = [], []
            for path, html, ref in refs:
                began = time.perf_counter()
                try:
                    output = run(html, f"http://127.0.0.1/{path.relative_to(directory)}")
                except Exception as exc:  # a library failing on a page scores zero there
                    print(f"{method} failed on {path}: {exc}", file=sys.stderr)
                    output = ""
                times.append(time.perf_counter() - began)
                rows.append(score(output, ref))
            summary = {k: statistics.mean(r[k] for r in rows) for k in rows[0]}
            summary["ms"] = 1000 * statistics.mean(times)
            results.setdefault(set_name, {})[method] = summary
        print(f"\n{set_name}: {len(refs)} pages")
        print("| method | recall | precision | headings kept | chrome leaked | chars ÷ article | ms/page |")
        print("|---|---|---|---|---|---|---|")
        for method, s in results[set_name].items():
            print(f"| {method} | {s['recall']:.3f} | {s['precision']:.3f} | {s['headings']:.3f} | "
                  f"{s['chrome']:.3f} | {s['chars_ratio']:.2f} | {s['ms']:.0f} |")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
