"""Fixtures of the git source tests (a pytest plugin: `pytest_plugins = ("tests.support.git_fixtures",)`):
a smart-HTTP server on 127.0.0.1 and an app allowed to fetch from it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from services.app import Archivist
from tests.conftest import make_settings
from tests.support.git_server import GitServer
from tests.support.git_support import TOKEN


@pytest.fixture(scope="module")
def git_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitServer]:
    server = GitServer(tmp_path_factory.mktemp("repos"), TOKEN)
    yield server
    server.close()


@pytest_asyncio.fixture(scope="module")
async def git_app(database_url: str, files_dir: Path, embedder: Any) -> AsyncIterator[Archivist]:
    settings = make_settings(
        database_url,
        files_dir,
        git_allow_private=True,
        job_poll_seconds=0.1,
        job_heartbeat_seconds=0.5,
        job_stale_seconds=2.0,
    )
    app = await Archivist.open(settings, embedder)
    yield app
    await app.close()
