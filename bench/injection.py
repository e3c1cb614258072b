"""Injection flags on real documentation: planted injections of every kind, and the same pages clean.

    nice -n 10 .venv/bin/python bench/injection.py [--sets django,postgresql,mkdocs] [--pages 30] [--seed 7]
        [--out bench/.cache/injection.json]

The labelled set is built at run time from Debian's documentation packages (python-django-doc,
postgresql-doc-15, mkdocs-doc; their text is never committed). Every page of each set goes through the
real page pipeline (services.pages.extract_html), the real chunker and the flag scan ingestion runs
(services.flags.chunk_flags): every flagged chunk there is a false flag. Then `--pages` pages per set are
drawn (seeded) and each gets one planted injection per kind and phrasing pool (bench/injection_payloads.json),
inserted after a paragraph of the article, and goes through the same path.

A plant is caught when every chunk that carries it is flagged, or when no chunk carries it because
extraction removed it (comments, `hidden` and `aria-hidden` elements: the agent never receives them;
counted as "removed"). A chunk carries a plant when it holds one of the plant's word 4-grams that the
clean page does not hold (for Unicode tag smuggling: any tag character). Printed: recall per kind and
pool (any flag, and the kind's own flag), precision over the flagged chunks of planted pages, and
false flags over all clean chunks.

Then the disguised set (issue 38, point 4): the same injections as a reader would see them but written
to slip past a scan of the raw text: one zero-width character inside two of its words, soft hyphens
inside its long words, a combining grapheme joiner inside every word, Cyrillic letters for Latin
look-alikes, fullwidth letters (visible phrasings of the `dev` and `heldout` pools, which the rules
catch undisguised); a paragraph hidden by a class of the page's own `<style>` sheet, a markdown comment
`[//]: # (...)` in a markdown source, and a hidden note beside 1,500 words of hidden filler (every
pool). Printed: recall per disguise, and over the set.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lxml.html
from lxml import etree

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from services.chunking import get_chunker  # noqa: E402
from services.core.settings import Settings  # noqa: E402
from services.flags import chunk_flags  # noqa: E402
from services.pages import extract_html  # noqa: E402
from services.pages.base import PageContext  # noqa: E402
from services.pages.main_content import SelectMainContent  # noqa: E402
from services.pages.parse import ParseHtml  # noqa: E402

SETS = {
    "django": ("python-django-doc", Path("/usr/share/doc/python-django-doc/html")),
    "postgresql": ("postgresql-doc-15", Path("/usr/share/doc/postgresql-doc-15/html")),
    "mkdocs": ("mkdocs-doc", Path("/usr/share/doc/mkdocs/html")),
}
PAYLOADS = json.loads((ROOT / "bench" / "injection_payloads.json").read_text())
_WORD = re.compile(r"\w+")
INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
POOLS = ("dev", "heldout", "heldout2")

#: kind -> (payload pool, how it is planted, the flag it should get; None: extraction removes it)
KINDS: dict[str, tuple[str, str, str | None]] = {
    "html_comment": ("hidden", "<!--{}-->", None),
    "hidden_attribute": ("hidden", "<div hidden>{}</div>", None),
    "aria_hidden": ("hidden", '<p><span aria-hidden="true">{}</span></p>', None),
    "display_none": ("hidden", '<div style="display:none">{}</div>', "hidden_text"),
    "visibility_hidden": ("hidden", '<p style="visibility: hidden">{}</p>', "hidden_text"),
    "zero_size": ("hidden", '<div style="height:0;overflow:hidden">{}</div>', "hidden_text"),
    "font_size_zero": ("hidden", '<p><span style="font-size:0px">{}</span></p>', "hidden_text"),
    "offscreen": ("hidden", '<div style="position:absolute; left:-9999px">{}</div>', "hidden_text"),
    "white_on_white": ("hidden", '<p><span style="color:#ffffff">{}</span></p>', "hidden_text"),
    "font_white": ("hidden", '<p><font color="white">{}</font></p>', "hidden_text"),
    "opacity_zero": ("hidden", '<p style="opacity:0">{}</p>', "hidden_text"),
    "tag_smuggling": ("injection_phrase", "tags", "invisible_chars"),
    "zero_width_split": ("injection_phrase", "<p>{}</p>", "invisible_chars"),
    "injection_phrase": ("injection_phrase", "<p>{}</p>", "prompt_injection"),
    "tool_call": ("tool_call", "<pre>{}</pre>", "tool_call"),
    "system_prompt": ("system_prompt", "<pre>{}</pre>", "system_prompt"),
    "remote_shell": ("remote_shell", "<pre><code>{}</code></pre>", "remote_shell"),
    "remote_shell_inline": ("remote_shell", "<p>Install it with <code>{}</code> and continue.</p>", "remote_shell"),
}


#: disguise -> (payload pool, the pools it draws from)
DISGUISES: dict[str, tuple[str, tuple[str, ...]]] = {
    "zero_width_inside": ("injection_phrase", ("dev", "heldout")),
    "soft_hyphen": ("injection_phrase", ("dev", "heldout")),
    "joiner_inside_words": ("injection_phrase", ("dev", "heldout")),
    "cyrillic_lookalikes": ("injection_phrase", ("dev", "heldout")),
    "fullwidth": ("injection_phrase", ("dev", "heldout")),
    "css_class_hidden": ("hidden", POOLS),
    "markdown_comment": ("hidden", POOLS),
    "hidden_filler": ("hidden", POOLS),
}
#: Latin letters and the Cyrillic letters that look the same
CYRILLIC = str.maketrans("aceopxyAEOPCHKMT", "асеорхуАЕОРСНКМТ")
#: what the grams of a plant are compared on: the text as a reader sees it
READ_AS = str.maketrans("асеорхуАЕОРСНКМТ", "aceopxyAEOPCHKMT")


def disguise(kind: str, text: str) -> str:
    """`text` with one disguise applied (the ones that rewrite the words themselves)."""
    if kind == "zero_width_inside":  # one zero-width space inside each of its two longest words
        longest = sorted(set(text.split()), key=len, reverse=True)[:2]
        return " ".join(w[: len(w) // 2] + "\u200b" + w[len(w) // 2 :] if w in longest else w for w in text.split())
    if kind == "soft_hyphen":  # a hyphenation hint inside every long word, as a typesetter leaves them
        return " ".join(w[:3] + "\u00ad" + w[3:] if len(w) >= 7 else w for w in text.split())
    if kind == "joiner_inside_words":  # a default-ignorable (combining grapheme joiner) inside every word
        return " ".join(w[:2] + "\u034f" + w[2:] if len(w) >= 4 else w for w in text.split())
    if kind == "cyrillic_lookalikes":
        return text.translate(CYRILLIC)
    if kind == "fullwidth":
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)
    return text


def words(text: str) -> list[str]:
    shown = unicodedata.normalize("NFKC", text).translate(READ_AS).replace("\u00ad", "").replace("\u034f", "")
    return _WORD.findall(shown.translate(INVISIBLE).lower())


def grams(text: str, n: int = 4) -> set[tuple[str, ...]]:
    tokens = words(text)
    n = min(n, len(tokens))
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)} if n else set()


def has_tags(text: str) -> bool:
    return any(0xE0000 <= ord(c) <= 0xE007F for c in text)


def to_tags(text: str) -> str:
    """ASCII as Unicode tag characters (invisible in every renderer)."""
    return "".join(chr(0xE0000 + ord(c)) for c in text if 0x20 <= ord(c) < 0x7F)


def zero_width_split(text: str) -> str:
    return " ".join("\u200b".join(word) for word in text.split(" "))


@dataclass
class Scan:
    chunks: int = 0
    flagged: int = 0
    by_flag: Counter[str] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)


def chunks_and_flags(html: str, url: str, settings: Settings) -> tuple[list[Any], list[list[str]]]:
    page = extract_html(html, url)
    if not page.markdown.strip():
        return [], []
    chunks = get_chunker(settings, document_type="html").chunk(page.markdown)
    return chunks, chunk_flags(page.title or "", chunks, page.metadata)


def scan_clean(pages: list[Path], settings: Settings, scan: Scan, name: str) -> None:
    for path in pages:
        chunks, flags = chunks_and_flags(path.read_text(errors="replace"), path.as_uri(), settings)
        scan.chunks += len(chunks)
        for chunk, found in zip(chunks, flags, strict=True):
            if found:
                scan.flagged += 1
                scan.by_flag.update(found)
                scan.examples.append({"set": name, "page": path.name, "flags": found, "text": chunk.text[:160]})


def article_paragraphs(html: str, url: str) -> tuple[Any, list[Any]]:
    """The parsed page and the paragraphs of its article (as the pipeline chooses it), 8+ words each."""
    page = PageContext(source=html, url=url)
    ParseHtml().run(page)
    SelectMainContent().run(page)
    if page.main is None:
        return page.tree, []
    return page.tree, [p for p in page.main.iter("p") if len(p.text_content().split()) >= 8]


def fill(template: str, rng: random.Random) -> str:
    host = rng.choice(PAYLOADS["hosts"])
    pkg = rng.choice(PAYLOADS["packages"])
    cmd = rng.choice(PAYLOADS["commands"]).replace("{host}", host).replace("{pkg}", pkg)
    return template.replace("{cmd}", cmd).replace("{host}", host).replace("{pkg}", pkg)


def plant(html: str, url: str, kind: str, payload: str, rng: random.Random) -> str | None:
    """The page with `payload` planted as `kind` after one of its article's paragraphs."""
    tree, paragraphs = article_paragraphs(html, url)
    if not paragraphs:
        return None
    anchor = rng.choice(paragraphs)
    form = KINDS[kind][1]
    if form == "tags":
        anchor.append(lxml.html.fragment_fromstring(f"<span>{to_tags(payload)}</span>"))
    elif form.startswith("<!--"):
        anchor.addnext(etree.Comment(" " + payload.replace("--", "- -") + " "))
    else:
        text = zero_width_split(payload) if kind == "zero_width_split" else payload
        element = lxml.html.fragment_fromstring(form.format(escape(text)))
        anchor.addnext(element)
    return lxml.html.tostring(tree, encoding="unicode")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def carries(chunk_text: str, kind: str, payload_grams: set[tuple[str, ...]]) -> bool:
    if kind == "tag_smuggling":
        return has_tags(chunk_text)
    return bool(grams(chunk_text, max((len(g) for g in payload_grams), default=4)) & payload_grams)


@dataclass
class Planted:
    total: Counter[tuple[str, str]] = field(default_factory=Counter)
    caught: Counter[tuple[str, str]] = field(default_factory=Counter)
    own_flag: Counter[tuple[str, str]] = field(default_factory=Counter)
    removed: Counter[tuple[str, str]] = field(default_factory=Counter)
    flagged_chunks: int = 0
    true_chunks: int = 0
    misses: list[dict[str, Any]] = field(default_factory=list)


def plant_disguised(html: str, url: str, kind: str, payload: str, rng: random.Random) -> str | None:
    """The page with `payload` planted under one disguise after one of its article's paragraphs (the
    markdown comment is planted in the page's markdown: see chunks_of_plant)."""
    tree, paragraphs = article_paragraphs(html, url)
    if not paragraphs:
        return None
    anchor = rng.choice(paragraphs)
    if kind == "css_class_hidden":
        style = lxml.html.fragment_fromstring("<style>.reader-note { display: none }</style>")
        head = tree.find(".//head")
        (head if head is not None else tree).append(style)
        anchor.addnext(lxml.html.fragment_fromstring(f'<p class="reader-note">{escape(payload)}</p>'))
    elif kind == "hidden_filler":  # the filler far from the note: it used to take the marks
        filler = " ".join(rng.choice(FILLER) for _ in range(1500))
        paragraphs[0].addprevious(lxml.html.fragment_fromstring(f'<div style="display:none">{filler}</div>'))
        anchor.addnext(lxml.html.fragment_fromstring(f'<p><span style="display:none">{escape(payload)}</span></p>'))
    else:
        anchor.addnext(lxml.html.fragment_fromstring(f"<p>{escape(disguise(kind, payload))}</p>"))
    return lxml.html.tostring(tree, encoding="unicode")


FILLER = "the a of to and in is for on with as by this that it be are from at or an".split()


def chunks_of_plant(html: str, url: str, payload: str, settings: Settings) -> tuple[list[Any], list[list[str]]]:
    """A markdown source with `payload` as a markdown comment after a paragraph of the page's markdown."""
    page = extract_html(html, url)
    paragraphs = page.markdown.split("\n\n")
    middle = max(1, len(paragraphs) // 2)
    markdown = "\n\n".join(
        [
            *paragraphs[:middle],
            "[//]: # (" + payload.replace("(", "\\(").replace(")", "\\)") + ")",
            *paragraphs[middle:],
        ]
    )
    chunks = get_chunker(settings, document_type="markdown").chunk(markdown)
    return chunks, chunk_flags(page.title or "", chunks, {})


def run_disguised(
    html: str, path: Path, kind: str, pool: str, rng: random.Random, settings: Settings, out: Planted, seen: set[Any]
) -> None:
    """Plant one injection under one disguise and score it like run_plant."""
    source_pool = DISGUISES[kind][0]
    payload = fill(rng.choice(PAYLOADS[source_pool][pool]), rng)
    if kind == "markdown_comment":
        chunks, flags = chunks_of_plant(html, path.as_uri(), payload, settings)
    else:
        planted = plant_disguised(html, path.as_uri(), kind, payload, rng)
        if planted is None:
            return
        chunks, flags = chunks_and_flags(planted, path.as_uri(), settings)
    score(out, (kind, pool), "disguised", chunks, flags, grams(payload) - seen, kind, path, payload)


def run_plant(
    html: str, path: Path, kind: str, pool: str, rng: random.Random, settings: Settings, out: Planted, seen: set[Any]
) -> None:
    """Plant one injection of `kind` into the page and score it; `seen` holds the clean page's 4-grams."""
    source_pool, _, expected = KINDS[kind]
    payload = fill(rng.choice(PAYLOADS[source_pool][pool]), rng)
    planted = plant(html, path.as_uri(), kind, payload, rng)
    if planted is None:
        return
    chunks, flags = chunks_and_flags(planted, path.as_uri(), settings)
    wanted = grams(payload) - seen  # the plant's own 4-grams, none the clean page already has
    score(out, (kind, pool), expected, chunks, flags, wanted, kind, path, payload)


def score(
    out: Planted,
    key: tuple[str, str],
    expected: str | None,
    chunks: list[Any],
    flags: list[list[str]],
    wanted: set[Any],
    kind: str,
    path: Path,
    payload: str = "",
) -> None:
    """Count one plant: caught when every chunk carrying it is flagged (or, `expected` None, none does)."""
    carrying = [i for i, c in enumerate(chunks) if carries(c.text, kind, wanted)]
    pool = key[1]
    out.total[key] += 1
    out.flagged_chunks += sum(1 for f in flags if f)
    out.true_chunks += sum(1 for i in carrying if flags[i])
    if not carrying:
        if expected is None:
            out.caught[key] += 1
            out.own_flag[key] += 1
            out.removed[key] += 1
        else:
            out.misses.append({"kind": kind, "pool": pool, "page": path.name, "why": "not in any chunk"})
        return
    if all(flags[i] for i in carrying):
        out.caught[key] += 1
        if expected is not None and all(expected in flags[i] for i in carrying):
            out.own_flag[key] += 1
    else:
        text = next(chunks[i].text for i in carrying if not flags[i])
        out.misses.append({"kind": kind, "pool": pool, "page": path.name, "payload": payload, "chunk": text[:300]})


def html_pages(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.html") if p.is_file())


def report(
    clean: dict[str, Scan], planted: Planted, elapsed: float, disguised: Planted | None = None
) -> dict[str, Any]:
    total_chunks = sum(s.chunks for s in clean.values())
    total_flagged = sum(s.flagged for s in clean.values())
    print("\n## False flags on clean chunks (every page of each set)\n")
    print("| set | chunks | flagged | rate | flags |\n|---|---:|---:|---:|---|")
    for name, s in clean.items():
        print(f"| {name} | {s.chunks:,} | {s.flagged} | {s.flagged / max(s.chunks, 1):.3%} | {dict(s.by_flag)} |")
    print(f"| all | {total_chunks:,} | {total_flagged} | {total_flagged / max(total_chunks, 1):.3%} | |")
    print("\n## Planted injections: recall (caught / planted)\n")
    print("| kind | pool | planted | caught (any flag) | with its own flag | removed by extraction |")
    print("|---|---|---:|---:|---:|---:|")
    for kind, pool in sorted(planted.total):
        key = (kind, pool)
        print(
            f"| {kind} | {pool} | {planted.total[key]} | {planted.caught[key]} | {planted.own_flag[key]} "
            f"| {planted.removed[key]} |"
        )
    summary: dict[str, Any] = {"clean_chunks": total_chunks, "clean_flagged": total_flagged}
    for pool in POOLS:
        keys = [k for k in planted.total if k[1] == pool]
        n = sum(planted.total[k] for k in keys)
        summary[f"recall_{pool}"] = sum(planted.caught[k] for k in keys) / max(n, 1)
        summary[f"recall_own_flag_{pool}"] = sum(planted.own_flag[k] for k in keys) / max(n, 1)
        summary[f"planted_{pool}"] = n
    n_all = sum(planted.total.values())
    summary["recall"] = sum(planted.caught.values()) / max(n_all, 1)
    summary["precision"] = planted.true_chunks / max(planted.flagged_chunks, 1)
    summary["false_flag_rate"] = total_flagged / max(total_chunks, 1)
    if disguised is not None and disguised.total:
        print("\n## Disguised injections: recall (caught / planted)\n")
        print("| disguise | planted | caught (any flag) |\n|---|---:|---:|")
        for kind in DISGUISES:
            n = sum(v for k, v in disguised.total.items() if k[0] == kind)
            caught = sum(v for k, v in disguised.caught.items() if k[0] == kind)
            print(f"| {kind} | {n} | {caught} ({caught / max(n, 1):.3f}) |")
        summary["disguised_planted"] = sum(disguised.total.values())
        summary["disguised_recall"] = sum(disguised.caught.values()) / max(summary["disguised_planted"], 1)
        print(f"\ndisguised recall {summary['disguised_recall']:.3f} over {summary['disguised_planted']} plants")
        for miss in disguised.misses[:10]:
            print("missed (disguised):", json.dumps(miss, ensure_ascii=False)[:400])
    pools = ", ".join(f"{p} {summary['recall_' + p]:.3f}" for p in POOLS)
    own = ", ".join(f"{p} {summary['recall_own_flag_' + p]:.3f}" for p in POOLS)
    print(
        f"\nrecall {summary['recall']:.3f} ({pools}; with the kind's own flag: {own}) "
        f"over {n_all} plants; precision {summary['precision']:.3f} ({planted.true_chunks}/{planted.flagged_chunks} "
        f"flagged chunks of planted pages carry a plant); false flags {total_flagged}/{total_chunks} clean chunks "
        f"({summary['false_flag_rate']:.3%}); {elapsed:.0f} s"
    )
    for miss in planted.misses[:20]:
        print("missed:", json.dumps(miss, ensure_ascii=False)[:400])
    for s in clean.values():
        for example in s.examples[:5]:
            print("false flag:", json.dumps(example, ensure_ascii=False)[:300])
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="django,postgresql,mkdocs")
    parser.add_argument("--pages", type=int, default=30, help="pages per set that get planted injections")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument(
        "--extra-clean",
        action="append",
        default=[],
        metavar="DIR",
        help="also count false flags on every HTML page under DIR (sets the rules were never tuned on)",
    )
    args = parser.parse_args()
    settings = Settings()
    rng = random.Random(args.seed)
    started = time.perf_counter()
    clean: dict[str, Scan] = {}
    planted, disguised = Planted(), Planted()
    for name in args.sets.split(","):
        package, root = SETS[name]
        if not root.is_dir():
            sys.exit(f"{root} is missing: apt-get install {package}")
        pages = html_pages(root)
        clean[name] = Scan()
        scan_clean(pages, settings, clean[name], name)
        chosen = rng.sample(pages, min(args.pages * 3, len(pages)))
        used = 0
        for path in chosen:
            html = path.read_text(errors="replace")
            if used >= args.pages or not article_paragraphs(html, path.as_uri())[1]:
                continue
            used += 1
            seen = set().union(*(grams(c.text) for c in chunks_and_flags(html, path.as_uri(), settings)[0]))
            for kind in KINDS:
                for pool in POOLS:
                    run_plant(html, path, kind, pool, rng, settings, planted, seen)
            for kind, (_, pools) in DISGUISES.items():
                for pool in pools:
                    run_disguised(html, path, kind, pool, rng, settings, disguised, seen)
        print(f"{name}: {len(pages)} pages, {clean[name].chunks:,} clean chunks, {used} pages planted", flush=True)
    for extra in args.extra_clean:
        name = Path(extra).name or extra
        clean[name] = Scan()
        scan_clean(html_pages(Path(extra)), settings, clean[name], name)
    summary = report(clean, planted, time.perf_counter() - started, disguised)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        misses = {"misses": planted.misses, "disguised_misses": disguised.misses}
        args.out.write_text(json.dumps({"summary": summary, **misses}, indent=2))


if __name__ == "__main__":
    main()
