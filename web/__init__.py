"""The web console: server-rendered pages over the same services as the MCP tools, at / of the HTTP server."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from services.app import Runtime
from services.core.settings import Settings

logger = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"


def create_web_app(runtime: Runtime, settings: Settings, host: str, tls: bool = False) -> Starlette:
    from web import pages_access, pages_add, pages_kb, pages_profiles, sso
    from web.core import Console

    console = Console(runtime, settings, host, tls)
    routes: list[Any] = [Mount("/static", app=StaticFiles(directory=str(STATIC)), name="static")]
    for module in (pages_kb, pages_add, pages_access, pages_profiles, sso):
        routes.extend(module.routes(console))
    return Starlette(routes=routes)


def mount_console(server: Any, runtime: Runtime, settings: Settings, host: str, tls: bool = False) -> None:
    """Serve the console at / of the streamable-HTTP app (after /mcp, which keeps precedence)."""
    server.console = create_web_app(runtime, settings, host, tls)
