"""Network leaves: URL normalisation, the SSRF address check, robots.txt rules.

Used by crawl, pages, fetchers and documents, so they sit below all of them."""
