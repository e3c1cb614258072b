"""What agents see, pinned (issue 31, point 2): `tools/list` exactly as published, and one real reply per
action of each tool (and the error contract's refusals), through a real MCP client.

The fixtures under tests/snapshots/ were taken before the tool layer was typed; these tests prove the
typed arguments and replies changed nothing an agent can see. Volatile values (ids, timestamps, scores,
durations, temporary paths, ports) are normalised: each id becomes `<id:N>` by first appearance, so a
reply that names the same id twice still says so. `ARCHIVIST_UPDATE_SNAPSHOTS=1` rewrites the fixtures
(only on purpose: the diff is then the change agents will see).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import pytest_asyncio
from mcp import Client

from server import build_server
from services.app import Runtime
from services.core.settings import Settings
from tests.conftest import make_settings
from tests.search.test_web_search import FakeSearxng
from tests.support.mcp_helpers import client_in_own_task, output_schema

SNAPSHOTS = Path(__file__).parents[1] / "snapshots"
UPDATE = os.environ.get("ARCHIVIST_UPDATE_SNAPSHOTS") == "1"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)?")
PORT = re.compile(r"127\.0\.0\.1:\d+")
VOLATILE_NUMBERS = frozenset({"score", "similarity", "duration_ms", "latency_ms", "elapsed_seconds"})


class Normaliser:
    """Replaces volatile values; ids keep their identity (`<id:N>`, numbered by first appearance)."""

    def __init__(self, files_dir: Path) -> None:
        self.ids: dict[str, str] = {}
        self.files_dir = str(files_dir)

    def text(self, value: str) -> str:
        value = value.replace(self.files_dir, "<files>")
        value = UUID.sub(lambda m: self.ids.setdefault(m.group(0), f"<id:{len(self.ids) + 1}>"), value)
        value = TIMESTAMP.sub("<time>", value)
        return PORT.sub("127.0.0.1:<port>", value)

    def __call__(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v, key) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if key in VOLATILE_NUMBERS and isinstance(value, int | float) and not isinstance(value, bool):
            return "<number>"
        return value


def compare(name: str, live: Any) -> None:
    """`live` equals the stored snapshot, key order included (byte-identical once serialised)."""
    path = SNAPSHOTS / name
    if UPDATE or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(live, indent=1, ensure_ascii=False) + "\n")
        if not UPDATE:
            pytest.fail(f"{name} did not exist; written now: review and commit it")
    stored = json.loads(path.read_text())
    assert live == stored
    assert json.dumps(live, ensure_ascii=False) == json.dumps(stored, ensure_ascii=False), "key order changed"


@pytest.fixture(scope="module")
def searxng() -> Any:
    fake = FakeSearxng()
    fake.thread.start()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.fixture(scope="module")
def snapshot_settings(database_url: str, files_dir: Path, searxng: FakeSearxng) -> Settings:
    return make_settings(database_url, files_dir, searxng_url=searxng.url + "/", searxng_max_results=2)


@pytest_asyncio.fixture(scope="module")
async def client(snapshot_settings: Settings, embedder: Any) -> AsyncIterator[Client]:
    server = build_server(snapshot_settings, runtime=Runtime(snapshot_settings, embedder=embedder), run_worker=False)
    async with client_in_own_task(server) as connected:
        yield connected


async def test_tools_list_is_unchanged(client: Client) -> None:
    listed = await client.list_tools()
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
    assert len(json.dumps(tools)) <= 7_000
    compare("tools_list.json", tools)


async def test_one_reply_per_action_is_unchanged(client: Client, files_dir: Path) -> None:
    n = Normaliser(files_dir)
    replies: dict[str, Any] = {}

    async def record(label: str, tool: str, **arguments: Any) -> dict[str, Any]:
        raw = await client.call_tool(tool, arguments)
        links = [block.uri for block in raw.content[1:] if block.type == "resource_link"]
        payload = json.loads(raw.content[0].text)
        assert raw.structured_content == payload and payload["success"] is not raw.is_error
        schema = await output_schema(client, tool)
        if schema is not None:
            jsonschema.validate(payload, schema)
        replies[label] = n({"is_error": raw.is_error, "body": payload, "links": [str(u) for u in links]})
        return payload

    # manage_source
    created = await record("manage_source.create", "manage_source", action="create", title="Lighthouses",
                           description="Towers with lamps", metadata={"topic": "sea"})  # fmt: skip
    sid = created["source"]["id"]
    await record("manage_source.get", "manage_source", action="get", source_id=sid)
    await record("manage_source.list", "manage_source", action="list", per_page=50)
    await record("manage_source.update", "manage_source", action="update", source_id=sid, description="Lamps")

    # manage_document
    text = "# Lighthouses\n\nA lighthouse lamp turns on a bath of mercury.\n\n## Keepers\n\nKeepers trimmed the wicks."
    doc = await record("manage_document.create", "manage_document", action="create", source_id=sid,
                       title="Lamps", content=text)  # fmt: skip
    did = doc["document"]["id"]
    await record("manage_document.get", "manage_document", action="get", document_id=did)
    await record("manage_document.list", "manage_document", action="list", source_id=sid)
    await record("manage_document.update", "manage_document", action="update", document_id=did, title="Lamp rooms")

    # search_knowledge_base: its modes
    await record("search.results", "search_knowledge_base", query="mercury lamp", source_id=sid)
    await record("search.context", "search_knowledge_base", query="mercury lamp", source_id=sid, max_tokens=200)
    await record("search.answer_without_sampling", "search_knowledge_base", query="mercury lamp",
                 source_id=sid, answer=True)  # fmt: skip
    await record("search.web", "search_knowledge_base", query="tides", search_type="web")

    # crawl_website (no worker: jobs stay queued, so every reply is deterministic)
    (files_dir / "notes").mkdir(exist_ok=True)
    (files_dir / "notes" / "a.md").write_text("# A\n\nAnchors hold ships.")
    started = await record("crawl_website.start", "crawl_website", action="start", url="http://127.0.0.1:9/",
                           title="Local site")  # fmt: skip
    job_id = started["crawl_job"]["id"]
    await record("crawl_website.status", "crawl_website", action="status", job_id=job_id)
    await record("crawl_website.list", "crawl_website", action="list", source_id=started["source_id"])
    await record("crawl_website.cancel", "crawl_website", action="cancel", job_id=job_id)
    await record("crawl_website.recrawl", "crawl_website", action="recrawl", job_id=job_id)
    await record("crawl_website.sync", "crawl_website", action="sync", folder_path=str(files_dir / "notes"))
    await record("manage_source.changes", "manage_source", action="changes", source_id=sid,
                 since="2000-01-01T00:00:00Z")  # fmt: skip

    # the error contract: did-you-mean, unknown action, bad types, missing arguments, unknown tool
    await record("error.unknown_argument", "search_knowledge_base", query="x", sourceId=sid)
    await record("error.unknown_action", "manage_source", action="rename", source_id=sid)
    await record("error.bad_type", "search_knowledge_base", query="x", match_count="many")
    await record("error.missing_required", "manage_document", title="x")
    await record("error.not_found", "manage_document", action="get", document_id="00000000-0000-0000-0000-000000000000")
    await record("error.bad_argument", "crawl_website", action="status", job_id=job_id, wait_seconds=-1)
    await record("error.unknown_tool", "no_such_tool", action="x")

    await record("manage_document.delete", "manage_document", action="delete", document_id=did)
    await record("manage_source.delete", "manage_source", action="delete", source_id=sid)
    compare("replies.json", replies)
