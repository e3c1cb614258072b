"""scripts/rooms.py, the replayable move of issue 31: the tree has nothing left to move, and the rewrites
a merged branch needs (old imports, mock targets, paths) come out right and stay put when run twice."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "rooms.py"


@pytest.fixture(scope="module")
def rooms() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rooms", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["rooms"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def rewrite(rooms: ModuleType, source: str) -> str:
    remap = rooms.Remapper(rooms.build_plan())
    return remap.joined(rooms.rewrite_tokens(rooms.rewrite_imports(source, remap, "x.py"), remap, "x.py"))


def test_the_tree_has_nothing_left_to_move() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


OLD = """\
from services import embedded, app
from services.sources import SourceService
from services import backup as backups
import services.database as d
from tests.mcp_helpers import ok
pytest_plugins = ("tests.git_fixtures",)


def f(monkeypatch):
    from services.errors import NotFound  # see services/paths.py and services/paths.caller_roots

    monkeypatch.setattr("services.sources.SourceService.get", None)
    return ROOT / "tests" / "crawl_worker_proc.py", "module: services.reembed:reembed_all"
"""

NEW = """\
from services.core import embedded
from services import app
from services.sources.service import SourceService
from services.documents import backup as backups
import services.core.database as d
from tests.support.mcp_helpers import ok
pytest_plugins = ("tests.support.git_fixtures",)


def f(monkeypatch):
    from services.core.errors import NotFound  # see services/access/paths.py and services/access/paths.caller_roots

    monkeypatch.setattr("services.sources.service.SourceService.get", None)
    return ROOT / "tests" / "support" / "crawl_worker_proc.py", "module: services.documents.reembed:reembed_all"
"""


def test_a_merged_branch_is_rewritten_once(rooms: ModuleType) -> None:
    assert rewrite(rooms, OLD) == NEW
    assert rewrite(rooms, NEW) == NEW


def test_a_module_of_the_new_package_is_left_alone(rooms: ModuleType) -> None:
    source = "from services.sources import titles, versions\nfrom services.sources.service import SourceService\n"
    assert rewrite(rooms, source) == source
