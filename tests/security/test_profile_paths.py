"""A profile carries its own allowed paths (issue 23, point 5): two profiles with folders A and B under
one server root (ARCHIVIST_ALLOWED_PATHS). A token confined to profile `pa`, through the SDK client over
streamable HTTP against a real `archivist serve --http`, reads A's file and directory and binds A as a
folder source, but not B's file, B's directory, a symlink from A into B, or `..` tricks. A profile path
outside the server's roots widens nothing, a profile without paths reads no files, the owner reads both,
and the services refuse on their own (not only the tool)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import pytest_asyncio

from services.access.scope import Scope, use_scope
from services.core.errors import PermissionDenied
from tests.e2e.test_e2e import server_env
from tests.security.support import bearer_transport, http_server
from tests.support.cli_process import run_in_process
from tests.support.mcp_helpers import call, client_in_own_task

A_TEXT = "Team A notes: the A roadmap ships in spring."
B_TEXT = "Team B secrets: the B merger closes in June."


@dataclass
class Tenants:
    root: Path
    a: Path
    b: Path
    outside: Path
    a_source: UUID
    b_source: UUID
    wide_source: UUID
    a_secret: str
    wide_secret: str
    bare_secret: str


@pytest_asyncio.fixture(scope="module")
async def tenants(app: Any, files_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Tenants:
    with use_scope(Scope.owner()):  # the fixture sets its data up as the local owner
        a, b = files_dir / "team-a", files_dir / "team-b"
        (a / "sub").mkdir(parents=True)
        (b / "sub").mkdir(parents=True)
        (a / "a.md").write_text(f"# A\n\n{A_TEXT}\n")
        (a / "sub" / "a2.md").write_text(f"# A2\n\n{A_TEXT} Second page.\n")
        (b / "b.md").write_text(f"# B\n\n{B_TEXT}\n")
        (b / "sub" / "b2.md").write_text(f"# B2\n\n{B_TEXT} Second page.\n")
        (a / "into-b.md").symlink_to(b / "b.md")
        (a / "b-folder").symlink_to(b, target_is_directory=True)
        outside = tmp_path_factory.mktemp("outside-roots")
        (outside / "o.md").write_text(f"# O\n\n{B_TEXT} Outside.\n")
        a_source = await app.sources.create(title="Team A", source_type="api")
        b_source = await app.sources.create(title="Team B", source_type="api")
        wide_source = await app.sources.create(title="Wide", source_type="api")
        await app.profiles.create("pa", "team a", [a_source.id], allowed_paths=[str(a)])
        await app.profiles.create("pb", "team b", [b_source.id], allowed_paths=[str(b)])
        await app.profiles.create("wide", "outside the roots", [wide_source.id], allowed_paths=[str(outside)])
        await app.profiles.create("bare", "no paths", [wide_source.id])
        _, a_secret = await app.tokens.create("a-writer", ["pa"])
        _, wide_secret = await app.tokens.create("wide-writer", ["wide"])
        _, bare_secret = await app.tokens.create("bare-writer", ["bare"])
        return Tenants(
            files_dir, a, b, outside, a_source.id, b_source.id, wide_source.id, a_secret, wide_secret, bare_secret
        )


@pytest_asyncio.fixture(scope="module")
async def url(tenants: Tenants, database_url: str, files_dir: Path) -> AsyncIterator[str]:
    async with http_server(database_url, files_dir) as served:
        yield served


@pytest_asyncio.fixture(scope="module")
async def team_a(url: str, tenants: Tenants) -> AsyncIterator[Any]:
    async with client_in_own_task(bearer_transport(url, tenants.a_secret)) as client:
        yield client


async def ingest(client: Any, source: UUID, path: Path | str) -> dict[str, Any]:
    return await call(client, "manage_document", action="create", source_id=str(source), file_path=str(path))


def refused(reply: dict[str, Any]) -> bool:
    return not reply["success"] and reply["error_code"] == "PERMISSION_DENIED"


async def texts_of(app: Any, source: UUID) -> str:
    rows = await app.db.pool.fetch("SELECT content FROM documents WHERE source_id = $1", source)
    return "\n".join(r["content"] for r in rows)


async def test_token_reads_its_own_profiles_file_and_directory(team_a: Any, tenants: Tenants, app: Any) -> None:
    one = await ingest(team_a, tenants.a_source, tenants.a / "a.md")
    assert one["success"], one
    folder = await ingest(team_a, tenants.a_source, tenants.a)
    assert folder["success"] and folder["files_ingested"] == 2, folder
    stored = await texts_of(app, tenants.a_source)
    assert "A roadmap" in stored and "B merger" not in stored  # the symlinks into B were not followed


async def test_token_cannot_read_the_other_profiles_file_or_directory(team_a: Any, tenants: Tenants) -> None:
    file_reply = await ingest(team_a, tenants.a_source, tenants.b / "b.md")
    folder_reply = await ingest(team_a, tenants.a_source, tenants.b)
    assert refused(file_reply), file_reply
    assert refused(folder_reply), folder_reply
    for reply in (file_reply, folder_reply):
        assert "b2.md" not in str(reply) and "B merger" not in str(reply)
        assert str(tenants.root) + "," not in reply["suggestion"]  # names its own paths, not the server's


async def test_a_refused_path_creates_no_source(team_a: Any, tenants: Tenants, app: Any) -> None:
    reply = await call(team_a, "manage_document", action="create", title="Stray", file_path=str(tenants.b / "b.md"))
    assert refused(reply), reply
    assert await app.db.pool.fetchval("SELECT count(*) FROM sources WHERE title = 'Stray'") == 0


@pytest.mark.parametrize(
    "trick",
    [
        "into-b.md",  # a file symlink from A into B
        "b-folder",  # a directory symlink from A into B
        "b-folder/b.md",
        "../team-b/b.md",  # `..` out of A
        "sub/../../team-b/sub",
        "..",  # A's parent: the server root itself
    ],
)
async def test_symlinks_and_dotdot_do_not_leave_the_profile(team_a: Any, tenants: Tenants, trick: str) -> None:
    reply = await ingest(team_a, tenants.a_source, f"{tenants.a}/{trick}")
    assert refused(reply), reply
    assert "B merger" not in str(reply)


async def test_token_binds_its_own_folder_but_not_the_others(team_a: Any, tenants: Tenants) -> None:
    own = await call(
        team_a, "crawl_website", action="sync", folder_path=str(tenants.a), source_id=str(tenants.a_source)
    )
    assert own["success"], own
    for path in (tenants.b, tenants.a / "b-folder", tenants.a / ".." / "team-b", tenants.root):
        other = await call(
            team_a, "crawl_website", action="sync", folder_path=str(path), source_id=str(tenants.a_source)
        )
        assert refused(other), (path, other)


async def test_a_profile_path_outside_the_server_roots_widens_nothing(url: str, tenants: Tenants) -> None:
    async with client_in_own_task(bearer_transport(url, tenants.wide_secret)) as wide:
        outside = await ingest(wide, tenants.wide_source, tenants.outside / "o.md")
        inside = await ingest(wide, tenants.wide_source, tenants.a / "a.md")
    assert refused(outside) and refused(inside), (outside, inside)
    assert "ARCHIVIST_ALLOWED_PATHS" in outside["error"], outside
    assert str(tenants.outside) not in str(outside)


async def test_a_profile_without_paths_reads_no_files(url: str, tenants: Tenants) -> None:
    async with client_in_own_task(bearer_transport(url, tenants.bare_secret)) as bare:
        reply = await ingest(bare, tenants.wide_source, tenants.a / "a.md")
    assert refused(reply), reply
    assert "allowed paths" in reply["error"] and "--allowed-path" in reply["suggestion"], reply


async def test_the_owner_reads_both_folders(app: Any, tenants: Tenants) -> None:
    with use_scope(Scope.owner()):
        a = await app.documents.create_from_file(tenants.b_source, tenants.a / "sub" / "a2.md")
        b = await app.documents.create_from_file(tenants.b_source, tenants.b / "b.md")
    assert a.document.id and b.document.id


async def test_the_services_refuse_on_their_own(app: Any, tenants: Tenants) -> None:
    """Defence in depth: documents and folder sync check the caller's roots, not only the tool."""
    with use_scope(await app.profiles.scope_for(["pa"], who="a-writer")):
        with pytest.raises(PermissionDenied):
            await app.documents.create_from_file(tenants.a_source, tenants.b / "b.md")
        with pytest.raises(PermissionDenied):
            await app.documents.create_from_file(tenants.a_source, tenants.a / "into-b.md")
        with pytest.raises(PermissionDenied):
            await app.documents.create_from_directory(tenants.a_source, tenants.b)
        with pytest.raises(PermissionDenied):
            await app.sync.bind(str(tenants.b), tenants.a_source)
        read = await app.documents.read_file(tenants.a / "a.md")
    assert "A roadmap" in read.content
    with use_scope(await app.profiles.scope_for(["pa", "pb"], who="both")):  # the union of two profiles
        assert "B merger" in (await app.documents.read_file(tenants.b / "b.md")).content


async def test_profile_paths_are_stored_resolved_and_cleared(app: Any, tenants: Tenants) -> None:
    made = await app.profiles.create("tmp-paths", allowed_paths=[f"{tenants.a}/sub/..", str(tenants.a)])
    assert made.allowed_paths == [str(tenants.a.resolve())]
    cleared = await app.profiles.update("tmp-paths", allowed_paths=None)
    assert cleared.allowed_paths is None
    with pytest.raises(Exception, match="not absolute"):
        await app.profiles.update("tmp-paths", allowed_paths=["relative/dir"])
    await app.profiles.delete("tmp-paths")


def test_profile_allowed_paths_through_the_cli(database_url: str, files_dir: Path, tenants: Tenants) -> None:
    """`archivist profile create|update --allowed-path DIR` (repeatable), `--no-allowed-paths`, shown in
    `show --json`; a path outside ARCHIVIST_ALLOWED_PATHS is saved but warned about."""
    env = server_env(database_url, files_dir)
    made = run_in_process(
        ["profile", "create", "cli-paths", "--allowed-path", str(tenants.a), "--allowed-path", str(tenants.outside)],
        env,
    )
    assert made.returncode == 0, made.stderr
    assert f"{tenants.outside.resolve()} lies outside ARCHIVIST_ALLOWED_PATHS" in made.stderr
    assert str(tenants.a) not in made.stderr
    shown = json.loads(run_in_process(["profile", "show", "cli-paths", "--json"], env).stdout)
    assert shown["allowed_paths"] == [str(tenants.a.resolve()), str(tenants.outside.resolve())]
    listed = json.loads(run_in_process(["profile", "list", "--json"], env).stdout)
    assert next(p for p in listed if p["name"] == "cli-paths")["allowed_paths"] == shown["allowed_paths"]
    assert "team-a" in run_in_process(["profile", "list"], env).stdout
    cleared = run_in_process(["profile", "update", "cli-paths", "--no-allowed-paths"], env)
    assert cleared.returncode == 0, cleared.stderr
    assert json.loads(run_in_process(["profile", "show", "cli-paths", "--json"], env).stdout)["allowed_paths"] is None
