"""Installed the way MCP clients install servers (issue 28): the wheel alone, outside the checkout.

`uvx`/`pipx` build an isolated environment from the wheel, so everything the server reads at run time
(migrations, console templates and static files) must ship inside it. This test builds the wheel from a
copy of the checkout, installs it into a new virtual environment that cannot import the checkout (the
environment's dependencies are borrowed through a .pth file, so nothing is downloaded), and talks to
`archivist serve` over stdio with the SDK's client: initialize, create, search.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.support.mcp_helpers import ok

ROOT = Path(__file__).resolve().parents[2]
#: what the wheel is built from: the project, without environments, caches and build output
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "site", "*.egg-info", "__pycache__", ".*_cache", ".cache"
)


def dependency_dirs() -> list[str]:
    """The running environment's site-packages directories (never the checkout itself)."""
    dirs = [*site.getsitepackages(), *(p for p in sys.path if p.endswith("site-packages"))]
    return [d for d in dict.fromkeys(dirs) if Path(d).is_dir() and Path(d).resolve() != ROOT]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with the freshly built wheel installed; returns its directory."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=SKIP)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(work / "dist"), str(source)], check=True, timeout=600)
    (wheel,) = (work / "dist").glob("archivist-*.whl")
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True, timeout=300)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(purelib) / "zz_dependencies.pth").write_text("\n".join(dependency_dirs()) + "\n")
    return env_dir


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARCHIVIST_", "PYTHON")) and k != "DATABASE_URL"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **extra)
    return env


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    probe = (
        "import server, services.core.database as d, web.render as r; print(server.__file__, d.SQL_DIR, r.TEMPLATES)"
    )
    done = subprocess.run(
        [str(installed / "bin" / "python"), "-c", probe], cwd=tmp_path, env=clean_env(),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    paths = [Path(p) for p in done.stdout.split()]
    assert all(p.resolve().is_relative_to(installed.resolve()) for p in paths), done.stdout
    assert len(list(paths[1].glob("0*.sql"))) >= 19 and (paths[2] / "base.html").is_file()
    assert (installed / "bin" / "archivist").is_file()
    (metadata,) = installed.glob("lib/python*/site-packages/archivist-*.dist-info/METADATA")
    name = json.loads((ROOT / "server.json").read_text())["name"]
    assert f"mcp-name: {name}" in metadata.read_text()  # what the MCP registry looks for on PyPI


async def test_uvx_style_install_serves_over_stdio(installed: Path, database_url: str, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    env = clean_env(DATABASE_URL=database_url, ARCHIVIST_ALLOWED_PATHS=str(notes))
    params = StdioServerParameters(
        command=str(installed / "bin" / "archivist"), args=["serve"], env=env, cwd=str(tmp_path)
    )
    async with Client(params) as client:
        created = await ok(
            client, "manage_document", action="create", title="Lighthouses",
            content="# Lenses\n\nA Fresnel lens focuses the lighthouse beam with concentric prisms.",
        )  # fmt: skip
        found = await ok(client, "search_knowledge_base", query="Fresnel lens prisms", search_type="keyword")
    assert found["results"][0]["document_id"] == created["document"]["id"], found
