# Two entry points: `make run` (serve over HTTP on the embedded PostgreSQL) and `make test`.
# Both create .venv and install everything on first use (torch first: the CPU wheel, pinned).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test docs lint chromium screenshots app-bridge bench-beir bench-scale bench-crawl bench-cluster bench-docs bench-arrival bench-ingest-cpu bench-keyword-only bench-extraction

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/archivist serve --http

# The web console's browser tests drive Debian's Chromium (never a browser downloaded by Playwright).
CHROMIUM ?= /usr/bin/chromium

chromium:
	@test -x $(CHROMIUM) || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends chromium; }

test: install chromium
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/python -m pytest -q -p no:cacheprovider

# Screenshots of the MCP App for the docs (docs/screenshots/app-*.png), on request only: `make test`
# runs the same browser test without writing them.
screenshots: install chromium
	ARCHIVIST_SCREENSHOTS=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_mcp_app.py

# The MCP App's bridge (tools/apps/ext-apps.js) from @modelcontextprotocol/ext-apps, pinned in
# tools/apps/bundle/package-lock.json (needs node and npm; the built file is committed).
app-bridge:
	cd tools/apps/bundle && npm ci --no-audit --no-fund && node build.mjs

# The documentation site (MkDocs, Material theme); --strict turns every warning into a failure.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

bench-beir: install
	$(BIN)/python bench/beir.py --corpus ../shared/data/scifact/corpus.jsonl \
		--queries ../shared/data/scifact/queries.jsonl --qrels ../shared/data/scifact/qrels/train.tsv \
		--out bench/results-scifact.json

bench-scale: install
	$(BIN)/python bench/scale.py --queries ../shared/data/scifact/queries.jsonl --with-source-filter \
		--out bench/results-scale.json

bench-crawl: install
	$(BIN)/python bench/crawl.py --pages 500

bench-cluster: install
	$(BIN)/python bench/cluster.py --pages 300 --clients 20 --duration 60

bench-docs: install
	nice -n 10 $(BIN)/python bench/docs.py --sets django,postgresql,mkdocs --max-pages 150

bench-arrival: install
	nice -n 10 $(BIN)/python bench/arrival.py --sets postgresql,django

bench-ingest-cpu: install
	nice -n 10 $(BIN)/python bench/ingest_cpu.py --pages 300 --files 400 --beir-docs 600

bench-keyword-only: install
	nice -n 10 $(BIN)/python bench/keyword_only.py --sets postgresql,django,mkdocs --max-pages 100

bench-extraction: install
	nice -n 10 $(BIN)/python bench/extraction.py --pages 30
