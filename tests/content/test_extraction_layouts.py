# ruff: noqa: E501 - pages are written in their generators' real (long-line) markup
"""Main-content extraction on small pages built in each generator's real layout (own words).

Each page carries the generator's chrome (navigation, sidebars, in-page TOC, breadcrumbs, header,
footer, previous/next, edit link, skip link, search, cookie banner, copy button, permalink "¶") and
an article with headings, paragraphs, lists, a table, a code block with a language, an admonition
and a definition list; the tests assert what is kept and what is dropped.
"""

from __future__ import annotations

import pytest

from services.pages import EXTRACTOR_VERSION, extract_html

BASE = "http://127.0.0.1:8000/guide/brewing.html"

ARTICLE_WORDS = (
    "Brewing with a moka pot",
    "Fill the lower chamber with hot water just below the valve.",
    "Grind size",
    "A medium-fine grind keeps the flow steady.",
    "Keep the heat low",
    "Remove the pot when it gurgles",
)
CHROME_WORDS = (
    "Skip to content",
    "Search the docs",
    "Previous chapter",
    "Next chapter",
    "Edit this page",
    "We use cookies",
    "Copyright 2031 Kettle Project",
    "Site navigation",
    "On this page",
    "Home / Guide",
    "Copy to clipboard",
    "Kettle docs logo",
)


def shared_article_body() -> str:
    """Paragraphs, list, table, definition list in plain markup every generator emits."""
    return """
<p>Fill the lower chamber with hot water just below the valve. Read the
<a href="../reference/valves.html#safety" title="valves">safety valve notes</a> first.</p>
<ul><li>Keep the heat low</li><li>Remove the pot when it gurgles</li></ul>
<table><thead><tr><th>Cup size</th><th>Grams</th></tr></thead>
<tbody><tr><td>three</td><td>15</td></tr><tr><td>six</td><td>30</td></tr></tbody></table>
<dl><dt>Crema</dt><dd><p>The foam on top of a shot.</p></dd></dl>
"""


def sphinx_page() -> str:
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<title>Brewing with a moka pot &#8212; Kettle 2.0 documentation</title>
<script>var DOCUMENTATION_OPTIONS = {{}};</script></head><body>
<a class="skip-link" href="#main">Skip to content</a>
<div class="related" role="navigation" aria-label="related navigation"><h3>Site navigation</h3>
<ul><li><a href="../index.html">Home / Guide</a></li><li class="right"><a href="grind.html">Next chapter</a></li>
<li class="right"><a href="intro.html">Previous chapter</a></li></ul></div>
<div class="document"><div class="documentwrapper"><div class="bodywrapper">
<div class="body" role="main">
<section id="brewing-with-a-moka-pot"><h1>Brewing with a moka pot<a class="headerlink" href="#brewing-with-a-moka-pot" title="Permalink to this heading">¶</a></h1>
<nav class="contents local" id="contents"><p class="topic-title">On this page</p><ul><li><a href="#grind-size">Grind size</a></li></ul></nav>
{shared_article_body()}
<div class="admonition warning"><p class="admonition-title">Warning</p><p>Never seal the valve shut.</p></div>
<section id="grind-size"><h2>Grind size<a class="headerlink" href="#grind-size">¶</a></h2>
<p>A medium-fine grind keeps the flow steady.</p>
<div class="highlight-python notranslate"><div class="highlight"><pre><span></span><span class="n">grind</span><span class="p">(</span><span class="s2">"medium"</span><span class="p">)</span>
</pre></div></div>
</section></section></div></div></div>
<div class="sphinxsidebar" role="navigation" aria-label="main navigation"><div class="sphinxsidebarwrapper">
<p class="logo"><a href="../index.html">Kettle docs logo</a></p>
<div id="searchbox" role="search"><h3>Search the docs</h3><form class="search"><input type="text" name="q"></form></div>
</div></div></div>
<div class="footer">Copyright 2031 Kettle Project. <a href="../_sources/guide/brewing.rst.txt">Edit this page</a></div>
<div class="cookie-banner">We use cookies</div>
</body></html>"""


def mkdocs_material_page() -> str:
    return f"""<!doctype html><html lang="en" class="no-js"><head><meta name="generator" content="mkdocs-1.5, mkdocs-material-9.4">
<title>Brewing with a moka pot - Kettle</title></head><body dir="ltr">
<a href="#brewing-with-a-moka-pot" class="md-skip">Skip to content</a>
<header class="md-header" data-md-component="header"><nav class="md-header__inner md-grid" aria-label="Header">
<a href="../.." class="md-header__button md-logo">Kettle docs logo</a>
<div class="md-search" data-md-component="search" role="dialog"><input class="md-search__input" placeholder="Search the docs"></div></nav></header>
<div class="md-container" data-md-component="container"><main class="md-main" data-md-component="main"><div class="md-main__inner md-grid">
<div class="md-sidebar md-sidebar--primary" data-md-component="sidebar" data-md-type="navigation">
<nav class="md-nav md-nav--primary" aria-label="Navigation"><label class="md-nav__title">Site navigation</label>
<ul class="md-nav__list"><li class="md-nav__item"><a href="../" class="md-nav__link">Home / Guide</a></li></ul></nav></div>
<div class="md-sidebar md-sidebar--secondary" data-md-component="sidebar" data-md-type="toc">
<nav class="md-nav md-nav--secondary" aria-label="On this page"><label class="md-nav__title">On this page</label></nav></div>
<div class="md-content" data-md-component="content"><article class="md-content__inner md-typeset">
<a href="https://example.invalid/edit/main/docs/guide/brewing.md" title="Edit this page" class="md-content__button md-icon">Edit this page</a>
<h1 id="brewing-with-a-moka-pot">Brewing with a moka pot<a class="headerlink" href="#brewing-with-a-moka-pot" title="Permanent link">&para;</a></h1>
{shared_article_body()}
<div class="admonition warning"><p class="admonition-title">Warning</p><p>Never seal the valve shut.</p></div>
<h2 id="grind-size">Grind size<a class="headerlink" href="#grind-size" title="Permanent link">&para;</a></h2>
<p>A medium-fine grind keeps the flow steady.</p>
<div class="language-python highlight"><pre><span></span><code><span class="n">grind</span><span class="p">(</span><span class="s2">"medium"</span><span class="p">)</span>
</code></pre><button class="md-clipboard md-icon" title="Copy to clipboard">Copy to clipboard</button></div>
<aside class="md-source-file">Last update: 2031</aside>
</article></div></div></main>
<footer class="md-footer"><nav class="md-footer__inner" aria-label="Footer">
<a href="../intro/" class="md-footer__link--prev">Previous chapter</a><a href="../grind/" class="md-footer__link--next">Next chapter</a></nav>
<div class="md-copyright">Copyright 2031 Kettle Project</div></footer></div>
<div class="md-consent" data-md-component="consent" id="__consent" hidden><div class="md-consent__inner">We use cookies</div></div>
</body></html>"""


def mdbook_page() -> str:
    return f"""<!DOCTYPE HTML><html lang="en" class="light" dir="ltr"><head><meta charset="UTF-8">
<title>Brewing with a moka pot - The Kettle Book</title></head><body class="sidebar-visible no-js">
<div id="body-container"><noscript>Enable JavaScript</noscript>
<nav id="sidebar" class="sidebar" aria-label="Table of contents"><div class="sidebar-scrollbox">
<ol class="chapter"><li class="chapter-item expanded"><a href="../index.html">Home / Guide</a></li></ol></div></nav>
<div id="page-wrapper" class="page-wrapper"><div class="page">
<div id="menu-bar-hover-placeholder"></div>
<div id="menu-bar" class="menu-bar sticky"><div class="left-buttons">
<button id="search-toggle" class="icon-button" type="button" title="Search the docs">Search the docs</button></div>
<h1 class="menu-title">The Kettle Book</h1>
<div class="right-buttons"><a href="https://example.invalid/edit/src/brewing.md" title="Suggest an edit">Edit this page</a></div></div>
<div id="search-wrapper" class="hidden"><form id="searchbar-outer" class="searchbar-outer"><input type="search" id="searchbar" placeholder="Search the docs"></form></div>
<div id="content" class="content"><main>
<h1 id="brewing-with-a-moka-pot"><a class="header" href="#brewing-with-a-moka-pot">Brewing with a moka pot</a></h1>
{shared_article_body()}
<blockquote><p><strong>Warning</strong>: Never seal the valve shut.</p></blockquote>
<h2 id="grind-size"><a class="header" href="#grind-size">Grind size</a></h2>
<p>A medium-fine grind keeps the flow steady.</p>
<pre><code class="language-python">grind("medium")
</code></pre>
</main>
<nav class="nav-wrapper" aria-label="Page navigation">
<a rel="prev" href="intro.html" class="mobile-nav-chapters previous" title="Previous chapter">Previous chapter</a>
<a rel="next prefetch" href="grind.html" class="mobile-nav-chapters next" title="Next chapter">Next chapter</a></nav>
</div></div>
<nav class="nav-wide-wrapper" aria-label="Page navigation"><a rel="prev" href="intro.html" class="nav-chapters previous">Previous chapter</a></nav>
</div></div></body></html>"""


def docbook_page() -> str:
    return f"""<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml"><head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8" />
<title>2.4. Brewing with a moka pot</title><meta name="generator" content="DocBook XSL Stylesheets V1.79.2" /></head>
<body id="docContent"><div class="navheader"><table width="100%" summary="Navigation header">
<tr><th colspan="3" align="center">Home / Guide</th></tr>
<tr><td width="20%" align="left"><a accesskey="p" href="intro.html">Previous chapter</a> </td>
<th width="60%" align="center">Chapter 2. Site navigation</th>
<td width="20%" align="right"> <a accesskey="n" href="grind.html">Next chapter</a></td></tr></table><hr /></div>
<div class="sect1" id="BREWING"><div class="titlepage"><div><div><h2 class="title" style="clear: both">2.4. Brewing with a moka pot</h2></div></div></div>
<div class="toc"><p><strong>On this page</strong></p><dl class="toc"><dt><span class="sect2"><a href="#GRIND">2.4.1. Grind size</a></span></dt></dl></div>
{shared_article_body()}
<div class="warning"><h3 class="title">Warning</h3><p>Never seal the valve shut.</p></div>
<div class="sect2" id="GRIND"><div class="titlepage"><div><div><h3 class="title">2.4.1. Grind size</h3></div></div></div>
<p>A medium-fine grind keeps the flow steady.</p>
<pre class="programlisting">grind("medium")</pre></div></div>
<div class="navfooter"><hr /><table width="100%" summary="Navigation footer"><tr>
<td width="40%" align="left"><a accesskey="p" href="intro.html">Previous chapter</a> </td>
<td width="20%" align="center"><a accesskey="h" href="index.html">Home / Guide</a></td>
<td width="40%" align="right"> <a accesskey="n" href="grind.html">Next chapter</a></td></tr></table></div>
</body></html>"""


def docusaurus_page() -> str:
    return f"""<!doctype html><html lang="en" dir="ltr" class="docs-wrapper plugin-docs"><head><meta name="generator" content="Docusaurus v3.1.0">
<title data-rh="true">Brewing with a moka pot | Kettle</title></head><body class="navigation-with-keyboard">
<div role="region" aria-label="Skip to main content"><a class="skipToContent_fXgn" href="#__docusaurus_skipToContent_fallback">Skip to content</a></div>
<div id="__docusaurus"><nav aria-label="Main" class="navbar navbar--fixed-top"><div class="navbar__inner">
<a class="navbar__brand" href="/"><b class="navbar__title">Kettle docs logo</b></a>
<div class="navbarSearchContainer_Bca1"><button type="button" class="DocSearch DocSearch-Button" aria-label="Search">Search the docs</button></div></div></nav>
<div class="main-wrapper mainWrapper_z2l0"><div class="docsWrapper_hBAB"><div class="docRoot_UBD9">
<aside class="theme-doc-sidebar-container docSidebarContainer_YfHR"><nav aria-label="Docs sidebar" class="menu thin-scrollbar">
<ul class="theme-doc-sidebar-menu menu__list"><li><a class="menu__link" href="/docs/intro">Site navigation</a></li></ul></nav></aside>
<main class="docMainContainer_TBSr"><div class="container padding-top--md padding-bottom--lg"><div class="row"><div class="col docItemCol_VOVn">
<div class="docItemContainer_Djhp"><article>
<nav class="theme-doc-breadcrumbs breadcrumbsContainer_Z_bl" aria-label="Breadcrumbs"><ul class="breadcrumbs"><li class="breadcrumbs__item"><a class="breadcrumbs__link" href="/">Home / Guide</a></li></ul></nav>
<div class="tocCollapsible_ETCw theme-doc-toc-mobile tocMobile_ITEo"><button type="button" class="clean-btn tocCollapsibleButton_TO0P">On this page</button></div>
<div class="theme-doc-markdown markdown"><header><h1>Brewing with a moka pot</h1></header>
{shared_article_body()}
<div class="theme-admonition theme-admonition-warning admonition_xJq3 alert alert--warning"><div class="admonitionHeading_Gvgb"><span class="admonitionIcon_Rf37"></span>warning</div>
<div class="admonitionContent_BuS1"><p>Never seal the valve shut.</p></div></div>
<h2 class="anchor anchorWithStickyNavbar_LWe7" id="grind-size">Grind size<a href="#grind-size" class="hash-link" aria-label="Direct link to Grind size" title="Direct link to Grind size">&#8203;</a></h2>
<p>A medium-fine grind keeps the flow steady.</p>
<div class="language-python codeBlockContainer_Ckt0 theme-code-block"><div class="codeBlockContent_biex"><pre tabindex="0" class="prism-code language-python codeBlock_bY9V thin-scrollbar"><code class="codeBlockLines_e6Vv"><span class="token-line"><span class="token plain">grind("medium")</span></span></code></pre>
<div class="buttonGroup__atx"><button type="button" aria-label="Copy code to clipboard" title="Copy" class="clean-btn">Copy to clipboard</button></div></div></div>
</div>
<footer class="theme-doc-footer docusaurus-mt-lg"><div class="theme-doc-footer-edit-meta-row row"><a href="https://example.invalid/edit/docs/brewing.md" class="theme-edit-this-page">Edit this page</a></div></footer>
</article>
<nav class="pagination-nav docusaurus-mt-lg" aria-label="Docs pages"><a class="pagination-nav__link pagination-nav__link--prev" href="/docs/intro"><div class="pagination-nav__label">Previous chapter</div></a>
<a class="pagination-nav__link pagination-nav__link--next" href="/docs/grind"><div class="pagination-nav__label">Next chapter</div></a></nav>
</div></div><div class="col col--3"><div class="tableOfContents_bqdL thin-scrollbar theme-doc-toc-desktop"><ul class="table-of-contents"><li><a href="#grind-size">On this page</a></li></ul></div></div></div></div></main>
</div></div></div>
<footer class="footer footer--dark"><div class="footer__copyright">Copyright 2031 Kettle Project</div></footer></div>
</body></html>"""


def blog_page() -> str:
    """A plain blog post: no generator markup, no <main>/<article>; chrome in divs."""
    return f"""<html><head><title>Brewing with a moka pot | Ana's coffee blog</title></head><body>
<div id="top-bar"><a href="/">Home / Guide</a> <a href="/archive">Archive</a> <a href="/about">About</a> <a href="/tags">Tags</a>
<a href="/feed">Feed</a> <a href="/contact">Contact</a></div>
<div id="cookie-notice">We use cookies to count visits. <a href="/privacy">Privacy policy</a></div>
<div class="wrapper"><div class="post">
<h1>Brewing with a moka pot</h1>
<p class="meta">Posted on a rainy Sunday morning by Ana, who drinks too much coffee.</p>
{shared_article_body()}
<h2>Grind size</h2>
<p>A medium-fine grind keeps the flow steady. Too fine a grind chokes the funnel and the water
pressure climbs; too coarse a grind makes a thin and sour cup that nobody enjoys.</p>
<pre><code class="language-python">grind("medium")</code></pre>
</div>
<div class="widget-links"><h3>Blogroll</h3><a href="https://a.example/">Site navigation</a> <a href="https://b.example/">Tea notes</a>
<a href="https://c.example/">Bread diary</a> <a href="https://d.example/">Bike repairs</a></div></div>
<div class="bottom"><a href="/">Copyright 2031 Kettle Project</a> <a href="/imprint">Imprint</a></div>
</body></html>"""


LAYOUTS = {
    "sphinx": (sphinx_page, "sphinx"),
    "mkdocs-material": (mkdocs_material_page, "mkdocs-material"),
    "mdbook": (mdbook_page, "mdbook"),
    "docbook": (docbook_page, "docbook"),
    "docusaurus": (docusaurus_page, "docusaurus"),
    "blog": (blog_page, "body+resiliparse"),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_article_is_kept_and_chrome_dropped(layout: str) -> None:
    build, expected_via = LAYOUTS[layout]
    page = extract_html(build(), BASE)
    text = page.markdown
    assert page.metadata["main_content"] == expected_via
    assert page.metadata["extractor"] == EXTRACTOR_VERSION
    for kept in ARTICLE_WORDS:
        assert kept in text, f"{layout}: lost {kept!r}"
    for dropped in CHROME_WORDS:
        assert dropped not in text, f"{layout}: leaked {dropped!r}"
    assert "¶" not in text and "\u200b" not in text
    assert "Never seal the valve shut." in text or layout == "blog"


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_headings_code_table_and_definitions_survive(layout: str) -> None:
    text = extract_html(LAYOUTS[layout][0](), BASE).markdown
    lines = text.splitlines()
    assert any(line.startswith("#") and line.endswith("Brewing with a moka pot") for line in lines)
    assert any(line.startswith("##") and line.endswith("Grind size") for line in lines)
    assert "| Cup size | Grams |" in text and "| six | 30 |" in text
    assert "**Crema**" in text and "The foam on top of a shot." in text
    fence = "```python" if layout != "docbook" else "```"  # DocBook's programlisting names no language
    assert f'{fence}\ngrind("medium")\n```' in text


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_link_text_stays_targets_go_to_outlinks(layout: str) -> None:
    page = extract_html(LAYOUTS[layout][0](), BASE)
    assert "safety valve notes" in page.markdown
    assert "](" not in page.markdown and "http" not in page.markdown and "valves.html" not in page.markdown
    assert "http://127.0.0.1:8000/reference/valves.html" in page.links  # absolute, fragment dropped
    assert all(link.startswith("http") and "#" not in link for link in page.links)


@pytest.mark.parametrize("layout", ["sphinx", "mkdocs-material", "docbook", "docusaurus"])
def test_admonitions_become_quoted_blocks_with_their_title(layout: str) -> None:
    text = extract_html(LAYOUTS[layout][0](), BASE).markdown
    assert "> **Warning:**" in text
    assert "> Never seal the valve shut." in text


def test_chrome_links_still_lead_the_crawl() -> None:
    page = extract_html(sphinx_page(), BASE)
    assert "http://127.0.0.1:8000/guide/grind.html" in page.links  # from the "next" link, dropped from text
    assert "Next chapter" not in page.markdown


def test_title_and_metadata() -> None:
    page = extract_html(docusaurus_page(), BASE)
    assert page.title == "Brewing with a moka pot | Kettle"
    assert page.metadata["generator"] == "Docusaurus v3.1.0" and page.metadata["language"] == "en"
