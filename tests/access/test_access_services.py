"""Profiles, tokens, audit and scope services against real PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from uuid import uuid4

import pytest

from services.access.scope import Scope, current_scope, use_scope
from services.core.errors import Conflict, InvalidArgument, NotFound, PermissionDenied


@pytest.mark.usefixtures("owner")
async def test_profiles_crud_and_scope(app) -> None:
    a = await app.sources.create(title="Alpha", source_type="api")
    b = await app.sources.create(title="Beta", source_type="api")
    p = await app.profiles.create("team-a", "Alpha docs", [b.id, a.id], search_type="hybrid", match_count=5)
    assert p.source_ids == [b.id, a.id] and p.search_type == "hybrid" and p.enabled
    with pytest.raises(Conflict):
        await app.profiles.create("team-a", "", [])
    for bad in ("Bad Name", "9lives", "-dash", "_under"):  # a slug that starts with a letter
        with pytest.raises(InvalidArgument) as refused:
            await app.profiles.create(bad, "", [])
        assert "starts with a letter" in refused.value.suggestion
    with pytest.raises(NotFound):
        await app.profiles.create("ghost", "", [uuid4()])
    p2 = await app.profiles.update("team-a", read_only=True, source_ids=[a.id])
    assert p2.read_only and p2.source_ids == [a.id] and p2.updated_at >= p.updated_at
    await app.profiles.create("off", "disabled", [b.id], enabled=False)
    assert [x.name for x in await app.profiles.list()] == ["off", "team-a"]
    scope = await app.profiles.scope_for(["team-a"], who="t")
    assert scope.source_ids == frozenset({a.id}) and scope.read_only
    assert scope.allows(a.id) and not scope.allows(b.id)
    with pytest.raises(NotFound) as err:
        await app.profiles.scope_for(["off"])
    assert "team-a" not in f"{err.value.message} {err.value.suggestion}"  # no list of other profiles
    with pytest.raises(NotFound):
        scope.check_source(b.id)
    with pytest.raises(PermissionDenied):
        scope.check_write("delete")
    with use_scope(scope):
        assert current_scope() is scope
    assert current_scope().source_ids is None
    await app.profiles.delete("off")
    with pytest.raises(NotFound):
        await app.profiles.get("off")


@pytest.mark.usefixtures("owner")
async def test_profile_output_settings_and_one_validation(app) -> None:
    """Issue 32.1: output settings stored by the profile service, checked by the same rules the console's
    form is drawn from, and `output_settings_for` (what the search tool's hit shaper calls)."""
    from services.access.profile_settings import HIT_DEFAULT_FIELDS, HIT_FIELDS, SNIPPET_CHARS, OutputSettings

    src = await app.sources.create(title="Output src", source_type="api")
    short = await app.profiles.create("out-short", "", [src.id], snippet_chars=200, hit_fields=["metadata", "score"])
    assert (short.snippet_chars, short.hit_fields) == (200, ["metadata", "score"])
    await app.profiles.create("out-wide", "every field", [src.id], snippet_chars=600)
    await app.profiles.create("out-core", "core only", [src.id], hit_fields=[])
    for bad in (
        {"snippet_chars": 10},
        {"snippet_chars": "lots"},
        {"hit_fields": ["metadata", "password"]},
        {"hit_fields": "metadata"},
        {"description": "x" * 1001},
        {"match_count": 21},
        {"match_count": 2.5},
        {"similarity_threshold": float("nan")},
        {"search_type": "magic"},
        {"enabled": "yes"},
    ):
        with pytest.raises(InvalidArgument):
            await app.profiles.update("out-short", **bad)
    # form values (text) are read by the same check: blank unsets, numbers are parsed
    form = await app.profiles.update(
        "out-wide", match_count="7", keyword_weight="0.25", search_type="", snippet_chars=""
    )
    assert (form.match_count, form.keyword_weight, form.search_type, form.snippet_chars) == (7, 0.25, None, None)
    assert (await app.profiles.update("out-wide", description="  " + "y" * 1000 + " ")).description == "y" * 1000

    settings = app.profiles.output_settings_for
    assert await settings(Scope.owner()) == OutputSettings(SNIPPET_CHARS[1], None)
    assert await settings(await app.profiles.scope_for(["out-short"])) == OutputSettings(200, ("score", "metadata"))
    both = await settings(await app.profiles.scope_for(["out-short", "out-core"]))
    assert both == OutputSettings(200, ("score", "metadata")) and "heading_path" not in both.carried()
    wide = await settings(await app.profiles.scope_for(["out-short", "out-wide"]))  # the defaults join in
    assert wide.carried() == HIT_DEFAULT_FIELDS
    chosen = await app.profiles.get("out-core")
    core = await settings(Scope.owner(), chosen)
    assert core.fields == () and core.carried() == ()
    every = await app.profiles.update("out-core", hit_fields=["all"])
    assert every.hit_fields == list(HIT_FIELDS)


@pytest.mark.usefixtures("owner")
async def test_tokens_hash_only_revoke_expiry(app) -> None:
    tok, secret = await app.tokens.create("alice", ["team-a"], read_only=True, rate_per_minute=10)
    assert secret.startswith("arch_") and tok.rate_per_minute == 10
    stored = await app.db.pool.fetch("SELECT token_hash FROM access_tokens")
    assert all(secret not in r["token_hash"] for r in stored)
    assert (await app.tokens.verify(secret)).name == "alice"
    assert await app.tokens.verify(secret + "x") is None
    with pytest.raises(NotFound):
        await app.tokens.create("bob", ["nope"])
    _, short = await app.tokens.create("short", [], expires_in=timedelta(milliseconds=200))
    assert await app.tokens.verify(short) is not None
    await asyncio.sleep(0.3)
    assert await app.tokens.verify(short) is None
    assert (await app.tokens.revoke("alice")).revoked_at is not None
    assert await app.tokens.verify(secret) is None
    assert [t.name for t in await app.tokens.list()] == ["alice", "short"]


async def test_audit_batched_and_query(app) -> None:
    for i in range(30):
        app.audit.record(
            "search_knowledge_base",
            "search",
            "alice",
            ["team-a"],
            {"query": "q" * (i * 20)},
            None if i % 3 else "NOT_FOUND",
            1.5 + i,
            100,
        )
    await app.audit.flush()
    page = await app.audit.query(since=timedelta(hours=1), per_page=20)
    assert page.total_count == 30 and len(page.items) == 20
    errs = await app.audit.query(errors_only=True, token="alice")
    assert errs.total_count == 10
    long = [e for e in page.items if isinstance(e.arguments["query"], dict)]
    assert long and "sha256" in long[0].arguments["query"]
    assert app.audit.dropped == 0
    assert Scope.owner().allows(None) and not Scope().allows(None)  # the bare Scope allows nothing


@pytest.mark.usefixtures("owner")
async def test_scoped_document_delete_cannot_reach_other_sources(app) -> None:
    mine = await app.sources.create(title="Mine", source_type="api")
    theirs = await app.sources.create(title="Theirs", source_type="api")
    kept = (await app.documents.create_from_text(theirs.id, "Someone else's notes on tides.")).document
    own = (await app.documents.create_from_text(mine.id, "My notes on currents.")).document
    with use_scope(Scope(source_ids=frozenset({mine.id}), read_only=False, who="t")):
        with pytest.raises(NotFound) as missing:
            await app.documents.delete(kept.id)
        with pytest.raises(NotFound) as random:
            await app.documents.delete(uuid4())
        assert missing.value.suggestion == random.value.suggestion  # out of scope reads as missing
        assert (await app.documents.delete(own.id))["chunks_deleted"] == own.chunk_count
    assert (await app.documents.get(kept.id)).chunk_count == kept.chunk_count


@pytest.mark.parametrize("search_type", ["vector", "hybrid"])
@pytest.mark.usefixtures("owner")
async def test_a_small_scope_in_a_large_knowledge_base_gets_a_full_list(app, search_type: str) -> None:
    """The scope filters inside the SQL, not over a candidate pool the rest of the knowledge base fills."""
    big, created = await app.sources.get_or_create("Otter encyclopedia")
    small = await app.sources.create(title=f"Field notes {search_type}", source_type="api")
    if created:
        for i in range(60):
            await app.documents.create_from_text(
                big.id, f"Sea otters float in kelp forests and hold hands while they sleep. Entry {i}.", f"Otters {i}"
            )
    for i in range(6):
        await app.documents.create_from_text(small.id, f"Note {i}: we saw an otter near the harbour wall.", f"Note {i}")
    query = "sea otters sleeping in kelp"
    everything = await app.search.search(query, match_count=5, search_type=search_type)
    assert {h.source_id for h in everything.hits} == {big.id}  # the large source crowds the top
    with use_scope(Scope(source_ids=frozenset({small.id}))):
        scoped = await app.search.search(query, match_count=5, search_type=search_type)
        assert len(scoped.hits) == 5 and {h.source_id for h in scoped.hits} == {small.id}
    with use_scope(Scope(source_ids=frozenset())):
        assert (await app.search.search(query, match_count=5, search_type=search_type)).hits == []
