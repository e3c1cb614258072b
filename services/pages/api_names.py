"""The names an API reference page documents, with the anchor of each entry (issue 36, point 7).

Documentation generators mark every documented object with an element id: Sphinx `<dt id="asyncio.
TaskGroup">` inside a `<dl class="py class">`, mkdocstrings `<h2 id="pkg.mod.Class" class="doc
doc-heading">`, rustdoc `<section id="method.spawn">` on the page of the item its URL names
(`tokio/runtime/struct.Runtime.html`), Javadoc `<section id="get(java.lang.Object)">` on the page of
the class its URL names (`java/util/HashMap.html`). This step reads them into `page.metadata
["api_names"]` as `[qualified name, anchor, kind]` (at most MAX_NAMES); the crawl writes them to the
symbol table (services/code/symbol_store.py), so a definition search finds the page that documents a
name. Ids are read, never trusted as markup: only names made of identifier characters are kept.
"""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

import re2

from services.pages.base import PageContext, Step

MAX_NAMES = 2000
API_NAMES = "api_names"
#: a dotted (or ::) identifier path, as documented names are written
NAME = re2.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*$")
RUST_ITEM = re2.compile(
    r"^(struct|enum|trait|fn|macro|type|union|constant|static|mod|attr|derive)\.([A-Za-z0-9_]+)\.html$"
)
RUST_MEMBER = re2.compile(r"^(method|tymethod|variant|structfield|associatedtype|associatedconstant)\.([A-Za-z0-9_]+)$")
JAVA_MEMBER = re2.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\(|-)")


class ExtractApiNames(Step):
    """Fill `page.metadata["api_names"]` when the page documents API objects."""

    def run(self, page: PageContext) -> None:
        if page.tree is None:
            return
        generator = str(page.metadata.get("generator") or "").lower()
        found: list[list[str]] = []
        if "rustdoc" in generator:
            found = _rustdoc(page)
        elif "javadoc" in generator:
            found = _javadoc(page)
        else:
            found = _sphinx(page) + _mkdocstrings(page)
        if found:
            unique: dict[tuple[str, str], list[str]] = {}
            for entry in found:
                unique.setdefault((entry[0], entry[1]), entry)  # the first of each
            page.metadata[API_NAMES] = list(unique.values())[:MAX_NAMES]


def _sphinx(page: PageContext) -> list[list[str]]:
    out = []
    for dt in page.tree.iterfind(".//dl/dt[@id]") if page.tree is not None else ():
        anchor = dt.get("id") or ""
        parent = dt.getparent()
        classes = (parent.get("class") or "").split() if parent is not None else []
        if NAME.search(anchor) and len(classes) >= 2:
            out.append([anchor, anchor, classes[1]])  # <dl class="py method">: the domain, then the kind
    return out


def _mkdocstrings(page: PageContext) -> list[list[str]]:
    out = []
    for heading in (
        page.tree.xpath("//*[@id][contains(concat(' ', @class, ' '), ' doc-heading ')]")
        if page.tree is not None
        else ()
    ):
        anchor = heading.get("id") or ""
        if NAME.search(anchor):
            kind = next(
                (
                    c[4:]
                    for c in (heading.getparent().get("class") or "").split()
                    if c.startswith("doc-") and c != "doc-object"
                ),
                "object",
            )
            out.append([anchor, anchor, kind])
    return out


def _url_parts(page: PageContext) -> list[str]:
    return [unquote(p) for p in urlsplit(page.url or "").path.split("/") if p]


def _rustdoc(page: PageContext) -> list[list[str]]:
    parts = _url_parts(page)
    item = RUST_ITEM.search(parts[-1]) if parts else None
    if item is None or page.tree is None:
        return []
    modules = [p for p in parts[:-1] if NAME.search(p)]
    # the crate's path is what follows the version segment (docs.rs/tokio/1.0/tokio/...), or all of it
    crate_at = max((i for i, p in enumerate(modules) if i > 0 and p == modules[0]), default=0)
    qualified = "::".join([*modules[crate_at:], item.group(2)])
    out = [[qualified, "", item.group(1)]]
    for element in page.tree.iterfind(".//*[@id]"):
        member = RUST_MEMBER.search(element.get("id") or "")
        if member:
            out.append([f"{qualified}::{member.group(2)}", member.group(0), member.group(1)])
    return out


def _javadoc(page: PageContext) -> list[list[str]]:
    parts = _url_parts(page)
    if not parts or not parts[-1].endswith(".html") or page.tree is None:
        return []
    name = parts[-1].removesuffix(".html")
    if not NAME.search(name.replace(".", "_")):
        return []
    packages = [p for p in parts[:-1] if NAME.search(p) and p.islower()]
    qualified = ".".join([*packages, name])
    out = [[qualified, "", "class"]]
    for element in page.tree.iterfind(".//*[@id]"):
        anchor = element.get("id") or ""
        member = JAVA_MEMBER.search(anchor)
        if member:
            out.append([f"{qualified}.{member.group(1)}", anchor, "member"])
    return out
