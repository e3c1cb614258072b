"""The knowledge base as the local user opens it from the command line.

The command line is the local user, the knowledge base's owner: it may ingest any file the user can
read. ARCHIVIST_ALLOWED_PATHS confines what MCP clients may name, not the owner at the keyboard.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.core.settings import Settings


def owner_settings(settings: Settings) -> Settings:
    """The settings the local user's commands run with: every path they can read is theirs to ingest."""
    return settings.model_copy(update={"allowed_paths": [Path(Path.cwd().anchor or "/")]})


async def open_archivist(settings: Settings) -> Any:
    from services.app import Archivist

    return await Archivist.open(owner_settings(settings))
