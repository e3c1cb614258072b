"""OpenAPI specifications: converted to one document per operation plus an overview, ingested from a
file, a directory, a URL and a crawl (fixture site on 127.0.0.1), re-ingested in place, and found by
search through the real embedder and PostgreSQL."""

from __future__ import annotations

import copy
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import pytest_asyncio
import yaml

from models.jobs import CrawlRequest
from server import build_server
from services.access.scope import Scope, use_scope
from services.app import Archivist, Runtime
from services.core.errors import InvalidArgument
from services.documents.specs import SpecIngestResult
from services.openapi import convert_spec, load_spec, load_spec_if_any
from tests.conftest import make_settings
from tests.crawl.test_crawl_jobs import crawl, run_until_finished
from tests.support.fixture_site import FixtureSite, html_page
from tests.support.mcp_helpers import client_in_own_task, err, ok
from tests.support.openapi_specs import CYCLES_31, PETSTORE_30, SWAGGER_20, as_json, large_spec

logger = logging.getLogger(__name__)


def by_title(spec: dict[str, Any]) -> dict[str, str]:
    return {document.title: document.markdown for document in convert_spec(spec)}


# ------------------------------------------------------------------ conversion (no database)


def test_petstore_operations_titles_parameters_and_resolved_schemas() -> None:
    documents = convert_spec(load_spec(PETSTORE_30))
    titles = [d.title for d in documents]
    assert titles == [
        "Harbour Petstore 1.4.0 — API overview",
        "GET /pets — List all pets",
        "POST /pets — Create a pet",
        "GET /pets/{petId} — Info for a specific pet",
        "DELETE /pets/{petId} — Remove a pet",
        "POST /store/orders — Order pet food",
    ]
    assert [d.fragment for d in documents][:3] == ["overview", "get-/pets", "post-/pets"]
    text = {d.title: d.markdown for d in documents}
    listing = text["GET /pets — List all pets"]
    assert listing.startswith("# pets\n\n## GET /pets — List all pets")  # the tag is the top heading
    assert (
        "| limit | query | no | integer (int32) | How many pets to return at one time (max 100). Example: 20. |"
        in listing
    )
    assert (
        "| species | query | no | string `Species` | Only pets of this species. Enum: cat, dog, parrot, tortoise. |"
        in listing
    )
    assert "- `x-next` (string): A link to the next page of responses" in listing
    assert "Schema: `Pets` (array of object `Pet`):" in listing
    # allOf merged: NewPet's fields, then Pet's own
    assert "- `id` (integer (int64), required): Unique id assigned by the shelter." in listing
    assert "- `status` (string): Adoption status. Enum: `available` | `pending` | `adopted`." in listing
    assert "**default — Unexpected error**" in listing and "- `message` (string, required)" in listing
    create = text["POST /pets — Create a pet"]
    assert "Register a new pet with the shelter" in create
    assert "**Request body**\n\nRequired." in create
    assert '- `name` (string, required): The pet\'s given name. Example: `"Marmalade"`.' in create
    assert 'Example `kitten` (A young cat):\n\n```json\n{\n  "name": "Marmalade",' in create
    path_item = text["GET /pets/{petId} — Info for a specific pet"]
    assert "| petId | path | yes | string | The id of the pet to retrieve |" in path_item  # path-level parameter
    assert '"name": "Biscuit"' in path_item  # media example kept
    assert "**deprecated**" in text["DELETE /pets/{petId} — Remove a pet"]
    assert (
        "- `sku` (string, required): Stock keeping unit of the food bag." in text["POST /store/orders — Order pet food"]
    )
    assert documents[2].metadata | {"method": "POST"} == documents[2].metadata
    assert documents[2].metadata["tags"] == ["pets"] and documents[2].metadata["operation_id"] == "createPet"


def test_overview_has_info_servers_and_tags() -> None:
    overview = convert_spec(load_spec(PETSTORE_30))[0]
    assert overview.metadata["openapi_kind"] == "overview" and overview.metadata["operations"] == 5
    text = overview.markdown
    assert "Adopt, list and look after the pets of the harbour shelter." in text
    assert "- https://pets.example.test/v1: Production" in text
    assert "  - `{region}` default `eu` (one of eu, us)" in text
    assert "### pets\n\nEverything about the shelter's pets.\n\n- GET /pets — List all pets" in text
    assert "- License: MIT" in text


def test_swagger_2_body_form_and_examples() -> None:
    text = by_title(SWAGGER_20)
    overview = text["Lighthouse Logbook 2.1 — API overview"]
    assert "Swagger 2.0 specification, 3 operations." in overview
    assert "- https://logbook.example.test/api" in overview
    assert "- `api_key`: apiKey in header `X-Keeper-Key`" in overview
    listing = text["GET /entries — List log entries"]
    assert "| since | query | no | string (date-time) | Only entries after this time. |" in listing
    assert "Enum: fog, gale, calm." in listing and "security: `api_key`" in listing
    assert "- `text` (string, required): What happened during the watch." in listing
    assert 'Example (application/json):\n\n```json\n[\n  {\n    "id": 1,' in listing
    write = text["POST /entries — Write a log entry"]
    assert "Schema: object `Entry` (required):" in write and "The entry to append." in write
    upload = text["PUT /keepers/{keeperId}/photo — Upload a keeper's photo"]
    assert "Content type: multipart/form-data" in upload and "- `photo` (file, required): JPEG" in upload
    assert upload.startswith("# keepers\n")


def test_recursive_refs_are_marked_not_expanded() -> None:
    documents = convert_spec(copy.deepcopy(CYCLES_31))
    text = {d.title: d.markdown for d in documents}
    person = text["GET /people/{id} — Get a person with ancestors"]
    assert person.startswith("# Family Tree\n")  # untagged: under the API's title
    assert "- `mother` (`Person`, recursive: see above)" in person
    assert "- `children` (array of `Person`, recursive: see above)" in person
    assert "- `nickname` (string | null)" in person
    assert '- `name` (string): Example: `"Ada"`.' in person  # 3.1 `examples` list
    assert "- `home` (`Address` (external or missing reference, not resolved))" in person
    nodes = text["GET /nodes — Walk the graph"]
    assert "- `next` (object `NodeB`)\n  - `back` (`NodeA`, recursive: see above)" in nodes
    assert documents[0].metadata["unresolved_refs"] == ["common.yaml#/components/schemas/Address"]


def test_webhooks_are_operations_too() -> None:
    spec = copy.deepcopy(CYCLES_31)
    spec["webhooks"] = {
        "personBorn": {
            "post": {
                "summary": "A person was born",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Person"}}}},
            }
        }
    }
    documents = {d.fragment: d for d in convert_spec(spec)}
    born = documents["post-webhook:personBorn"]
    assert born.title == "POST webhook:personBorn — A person was born"
    assert "- `mother` (`Person`, recursive: see above)" in born.markdown


def test_a_real_spec_from_an_installed_package() -> None:
    """litellm (installed with crawl4ai) ships its proxy's OpenAPI spec; read in place, never copied."""
    found = importlib.util.find_spec("litellm")  # located, not imported (its import takes seconds)
    locations = list(found.submodule_search_locations or []) if found else []
    path = Path(locations[0] if locations else "/nonexistent") / "proxy" / "openapi.json"
    if not path.is_file():
        pytest.skip("this litellm has no proxy/openapi.json")
    documents = convert_spec(load_spec(path.read_text()))
    titles = [d.title for d in documents]
    assert titles[0].startswith("LiteLLM API") and len(titles) > 3
    chat = next(d for d in documents if d.title.startswith("POST /chat/completions"))
    assert "- `model` (string): ID of the model to use." in chat.markdown
    assert "### Request body" in chat.markdown and "### Responses" in chat.markdown  # long: headed


def test_short_operations_are_flat_and_long_ones_keep_section_headings() -> None:
    spec = load_spec(PETSTORE_30)
    assert "\n### " not in by_title(spec)["POST /pets — Create a pet"]  # one chunk: no heading to split at
    fields = {f"field_{i}": {"type": "string", "description": f"Field number {i} of the ledger."} for i in range(60)}
    spec["components"]["schemas"]["NewPet"]["properties"].update(fields)
    create = by_title(spec)["POST /pets — Create a pet"]
    assert "\n### Request body\n" in create and "\n### Responses\n" in create and "\n#### 201 — The pet" in create


def test_deep_schemas_are_capped() -> None:
    spec = copy.deepcopy(CYCLES_31)
    deep: dict[str, Any] = {"type": "string"}
    for level in range(12):
        deep = {"type": "object", "properties": {f"level{level}": deep}}
    spec["components"]["schemas"]["NodeA"] = deep
    nodes = by_title(spec)["GET /nodes — Walk the graph"]
    assert "- … (nested fields omitted)" in nodes and "level0" not in nodes


def test_detection_by_content() -> None:
    assert load_spec_if_any(PETSTORE_30) is not None
    assert load_spec_if_any(as_json(SWAGGER_20)) is not None
    assert load_spec_if_any(json.dumps(SWAGGER_20)) is not None  # minified JSON
    assert load_spec_if_any('{"name": "package", "version": "1"}') is None
    assert load_spec_if_any("openapi: [unclosed") is None
    assert load_spec_if_any("title: notes\nbody: openapi is mentioned here\n") is None
    with pytest.raises(InvalidArgument):
        load_spec('{"name": "not a spec"}')


# ------------------------------------------------------------------ ingestion (PostgreSQL + embedder)


@pytest_asyncio.fixture(scope="module")
async def pets(app: Archivist, files_dir: Path) -> dict[str, Any]:
    """The petstore spec ingested from a YAML file into its own source."""
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        path = files_dir / "openapi" / "petstore.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(PETSTORE_30)
        source, _ = await app.sources.get_or_create("Harbour Petstore API")
        result = await app.documents.create_from_file(source.id, path)
        assert isinstance(result, SpecIngestResult)
        return {"source_id": source.id, "path": path, "result": result}


async def documents_of(app: Archivist, source_id: UUID) -> dict[str, Any]:
    rows = await app.db.pool.fetch(
        "SELECT id, url, title, content, metadata, updated_at FROM documents WHERE source_id = $1", source_id
    )
    return {r["url"].split("#", 1)[1]: r for r in rows}


async def test_file_ingest_makes_one_document_per_operation(app: Archivist, pets: dict[str, Any]) -> None:
    result: SpecIngestResult = pets["result"]
    assert result.count("created") == 6 and result.deleted == 0
    summary = result.summary()
    assert summary["operations"] == 5 and summary["openapi_version"] == "3.0.3"
    docs = await documents_of(app, pets["source_id"])
    assert set(docs) == {
        "overview",
        "get-/pets",
        "post-/pets",
        "get-/pets/{petId}",
        "delete-/pets/{petId}",
        "post-/store/orders",
    }
    create = docs["post-/pets"]
    assert create["url"] == pets["path"].as_uri() + "#post-/pets"
    assert create["title"] == "POST /pets — Create a pet"
    metadata = create["metadata"] if isinstance(create["metadata"], dict) else json.loads(create["metadata"])
    assert metadata["openapi_spec"] == pets["path"].as_uri() and metadata["method"] == "POST"
    chunks = await app.db.pool.fetch(
        "SELECT heading_path FROM chunks WHERE document_id = $1 ORDER BY chunk_index", create["id"]
    )
    assert chunks and chunks[0]["heading_path"][:2] == ["pets", "POST /pets — Create a pet"]


@pytest.mark.usefixtures("owner")
async def test_search_finds_the_create_operation(app: Archivist, pets: dict[str, Any]) -> None:
    outcome = await app.search.search("how do I create a pet", pets["source_id"], match_count=5)
    titles = [hit.document_title for hit in outcome.hits]
    logger.info("search 'how do I create a pet': %s", titles)
    assert "POST /pets — Create a pet" in titles[:3], titles
    assert titles[0] == "POST /pets — Create a pet", titles


@pytest.mark.usefixtures("owner")
async def test_reingest_is_idempotent_and_removes_vanished_operations(app: Archivist, pets: dict[str, Any]) -> None:
    source_id, path = pets["source_id"], pets["path"]
    before = await documents_of(app, source_id)
    again = await app.documents.create_from_file(source_id, path)
    assert isinstance(again, SpecIngestResult)
    assert again.count("unchanged") == 6 and again.chunks_created == 0 and again.deleted == 0
    spec = yaml.safe_load(PETSTORE_30)
    del spec["paths"]["/store/orders"]
    spec["paths"]["/pets"]["post"]["summary"] = "Create a pet (adoption intake)"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    changed = await app.documents.create_from_file(source_id, path)
    assert isinstance(changed, SpecIngestResult)
    assert changed.deleted == 1 and changed.count("updated") == 2  # the overview and POST /pets
    after = await documents_of(app, source_id)
    assert set(after) == set(before) - {"post-/store/orders"}
    assert after["post-/pets"]["id"] == before["post-/pets"]["id"]  # same URL, same document
    assert after["post-/pets"]["title"] == "POST /pets — Create a pet (adoption intake)"
    assert after["get-/pets"]["updated_at"] == before["get-/pets"]["updated_at"]
    path.write_text(PETSTORE_30)
    restored = await app.documents.create_from_file(source_id, path)
    assert isinstance(restored, SpecIngestResult) and restored.count("created") == 1


@pytest.mark.usefixtures("owner")
async def test_directory_ingest_expands_specs_and_keeps_other_files(
    app: Archivist, files_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("services.documents.files.MAX_DIRECTORY_FILES", 3)  # counts files, not operations
    folder = files_dir / "api-folder"
    folder.mkdir()
    (folder / "logbook.json").write_text(as_json(SWAGGER_20))
    (folder / "package.json").write_text('{"name": "lamp", "version": "1.0.0"}')
    (folder / "notes.md").write_text("# Notes\n\nThe lighthouse keepers keep a log.\n")
    source, _ = await app.sources.get_or_create("Logbook folder")
    results, failures, skipped = await app.documents.create_from_directory(source.id, folder)
    assert failures == [] and skipped == 0
    titles = {result.document.title for _, result in results}
    assert {"Lighthouse Logbook 2.1 — API overview", "POST /entries — Write a log entry", "Notes"} <= titles
    assert "package.json" in titles and len(results) == 6  # overview + 3 operations + 2 files


def test_a_spec_of_1100_operations_becomes_a_document_each() -> None:
    """A large spec (1,000+ operations, issue 19): every operation its own document, schemas resolved.
    Ingesting all 1,101 through the embedder, timed, is `make bench-openapi` (bench/openapi_ingest.py)."""
    documents = convert_spec(large_spec(220))
    titles = [d.title for d in documents]
    assert len(documents) == 1101 and len(set(titles)) == 1101
    last = by_title(large_spec(220))["POST /r219 — Create a Resource219"]
    assert "`label` (string): Shelf label of item kind 219." in last  # the $ref'd schema, resolved


@pytest.mark.usefixtures("owner")
async def test_a_spec_ingests_a_document_per_operation_and_reingests_without_embedding(
    app: Archivist, files_dir: Path
) -> None:
    spec = large_spec(12)  # 60 operations: the 1,100-operation timing is bench/openapi_ingest.py
    path = files_dir / "openapi" / "fleet.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec))
    source, _ = await app.sources.get_or_create("Warehouse Fleet API")
    result = await app.documents.create_from_file(source.id, path)
    assert isinstance(result, SpecIngestResult)
    assert result.count("created") == 61 and result.chunks_created >= 61
    embedded = app.documents.backlog.embedded
    again = await app.documents.create_from_file(source.id, path)
    assert isinstance(again, SpecIngestResult) and again.count("unchanged") == 61
    assert again.chunks_created == 0 and app.documents.backlog.embedded == embedded  # nothing embedded twice


async def test_manage_document_tool_replies_with_the_operations(settings: Any, embedder: Any, files_dir: Path) -> None:
    path = files_dir / "openapi" / "tree.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(as_json(CYCLES_31))
    server = build_server(settings, runtime=Runtime(settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as client:
        reply = await ok(client, "manage_document", action="create", title="Family Tree API", file_path=str(path))
        assert reply["operations"] == 2 and reply["documents_created"] == 3 and reply["source_created"] is True
        assert [d["title"] for d in reply["documents"]][1] == "GET /people/{id} — Get a person with ancestors"
        again = await ok(client, "manage_document", action="create", source_id=reply["source_id"], file_path=str(path))
        assert again["documents_unchanged"] == 3 and again["documents_deleted"] == 0
        await err(
            client, "manage_document", "INVALID_ARGUMENT", action="create", source_id=reply["source_id"], url="ftp://x"
        )


# ------------------------------------------------------------------ URL and crawl (fixture site on 127.0.0.1)


@pytest_asyncio.fixture(scope="module")
async def crawl_app(database_url: str, files_dir: Path, embedder: Any) -> Any:
    settings = make_settings(
        database_url, files_dir, crawl_delay_seconds=0, crawl_page_timeout=2.0, job_poll_seconds=0.1
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()


@pytest.fixture
def site() -> Any:
    with FixtureSite(with_defaults=False) as running:
        yield running


@pytest.mark.usefixtures("owner")
async def test_url_ingest_of_a_spec(crawl_app: Archivist, site: FixtureSite) -> None:
    site.set_page("/specs/logbook.yaml", yaml.safe_dump(SWAGGER_20), "application/yaml")
    source, _ = await crawl_app.sources.get_or_create("Logbook by URL")
    url = site.url_for("/specs/logbook.yaml")
    result = await crawl_app.documents.create_from_url(source.id, url)
    assert isinstance(result, SpecIngestResult) and result.count("created") == 4
    docs = await documents_of(crawl_app, source.id)
    assert docs["post-/entries"]["url"] == url + "#post-/entries"
    site.set_page("/raw/petstore.yaml", PETSTORE_30, "text/plain; charset=utf-8")  # as raw file hosts serve it
    raw = await crawl_app.documents.create_from_url(source.id, site.url_for("/raw/petstore.yaml"))
    assert isinstance(raw, SpecIngestResult) and raw.count("created") == 6
    site.set_page("/data.json", '{"plain": "data"}', "application/json")
    plain = await crawl_app.documents.create_from_url(source.id, site.url_for("/data.json"))
    assert not isinstance(plain, SpecIngestResult) and plain.document.document_type == "json"


@pytest.mark.usefixtures("owner")
async def test_crawl_ingests_a_linked_spec_as_operations(crawl_app: Archivist, site: FixtureSite) -> None:
    links = [("/openapi.json", "OpenAPI"), ("/config.json", "Config"), ("/guide", "Guide")]
    site.set_page("/", html_page("Petstore developer portal", ["Our API reference is below."], links))
    site.set_page("/guide", html_page("Getting started", ["Ask the shelter for an API key first."]))
    site.set_page("/openapi.json", json.dumps(yaml.safe_load(PETSTORE_30)), "application/json")
    site.set_page("/config.json", '{"theme": "dark"}', "application/json")
    job = await crawl(crawl_app, site.url_for("/"), recursive=True, max_depth=2)
    assert job.pages_failed == 0 and job.skipped_by_reason.get("non-text") == 1  # config.json
    rows = await crawl_app.db.pool.fetch("SELECT url, title FROM documents WHERE source_id = $1", job.source_id)
    titles = {r["url"]: r["title"] for r in rows}
    spec_url = site.url_for("/openapi.json")
    assert titles[spec_url + "#post-/pets"] == "POST /pets — Create a pet"
    assert titles[spec_url + "#overview"] == "Harbour Petstore 1.4.0 — API overview"
    assert sum(1 for url in titles if url.startswith(spec_url + "#")) == 6
    assert len(titles) == 8  # 6 from the spec, the portal page and the guide
    outcome = await crawl_app.search.search("how do I create a pet", job.source_id, match_count=3)
    assert outcome.hits[0].document_title == "POST /pets — Create a pet"
    again = await run_until_finished(
        crawl_app, (await crawl_app.crawl.recrawl(CrawlRequest(source_id=job.source_id))).job.id
    )
    assert again.status == "completed", again
    rows = await crawl_app.db.pool.fetch("SELECT url FROM documents WHERE source_id = $1", again.source_id)
    assert again.source_id == job.source_id and len(rows) == 8
