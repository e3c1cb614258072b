"""Ready-to-paste MCP client entries for the "Connect a client" dialog."""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any

from services.access.redaction import REDACTED, redact_text
from services.core.settings import Settings

TOKEN_PLACEHOLDER = "<your access token>"
#: what a DATABASE_URL password becomes in a printed or displayed entry (the client's environment supplies it)
PASSWORD_REFERENCE = "${ARCHIVIST_DB_PASSWORD}"


def server_command() -> list[str]:
    """The absolute command that starts the stdio server (`archivist serve`)."""
    exe = shutil.which("archivist") or os.path.join(os.path.dirname(sys.executable), "archivist")
    return [os.path.abspath(exe), "serve"]


def client_env(settings: Settings) -> dict[str, str]:
    """The environment a stdio client entry needs to reach this knowledge base (the database password
    as an environment reference, never its value). ARCHIVIST_ALLOWED_PATHS only when it was chosen: its
    default, the working directory of whoever prints the entry, is not the client's to inherit."""
    env: dict[str, str] = {}
    # An empty value would make a stdio server refuse every file, where leaving it out lets it read under
    # the directory the client starts it in (an HTTP server's settings hold [] when none was chosen).
    if "allowed_paths" in settings.model_fields_set and settings.allowed_paths:
        env["ARCHIVIST_ALLOWED_PATHS"] = os.pathsep.join(str(p) for p in settings.allowed_paths)
    if settings.database_url:
        env["DATABASE_URL"] = dsn_for_entry(settings.database_url)
    else:
        env["ARCHIVIST_DATA_DIR"] = str(settings.data_dir)
    return env


def dsn_for_entry(url: str) -> str:
    """DATABASE_URL as a client entry shows it: the one redaction, its mask an environment reference."""
    return redact_text(url).replace(REDACTED, PASSWORD_REFERENCE)


def stdio_entry(settings: Settings) -> dict[str, Any]:
    """The same stdio entry `archivist config claude-desktop` prints."""
    command, *args = server_command()
    return {"command": command, "args": args, "env": client_env(settings)}


def client_entries(settings: Settings, mcp_url: str, token: str | None, needs_token: bool) -> list[dict[str, Any]]:
    """Claude Code, Claude Desktop, Cursor and VS Code entries for this server's /mcp endpoint.

    Claude Desktop gets the local stdio entry only when no token is needed (an open loopback console,
    whose user can read the server's settings anyway): it carries DATABASE_URL, which a signed-in
    token holder must not see. Otherwise it bridges to /mcp with mcp-remote."""
    secret = token or (TOKEN_PLACEHOLDER if needs_token else None)
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    http = {"type": "http", "url": mcp_url, **({"headers": headers} if headers else {})}
    header_flag = f' --header "Authorization: Bearer {secret}"' if secret else ""
    desktop: dict[str, Any] = {"mcpServers": {"archivist": stdio_entry(settings)}}
    if secret:  # Claude Desktop speaks stdio: bridge to the HTTP endpoint with mcp-remote (needs Node)
        desktop = {
            "mcpServers": {
                "archivist": {
                    "command": "npx",
                    "args": ["-y", "mcp-remote", mcp_url, "--header", f"Authorization: Bearer {secret}"],
                }
            }
        }
    cursor = {"mcpServers": {"archivist": {"url": mcp_url, **({"headers": headers} if headers else {})}}}
    mcp_json = json.dumps({"mcpServers": {"archivist": http}}, indent=2)
    return [
        {
            "id": "claude-code",
            "name": "Claude Code",
            "blocks": [  # two ways, each copied on its own: a command for the terminal, or the JSON
                block(
                    "claude-code",
                    "Run in a terminal:",
                    f"claude mcp add --transport http archivist {mcp_url}{header_flag}",
                ),
                block("claude-code-json", "Or put this in .mcp.json:", mcp_json),
            ],
        },
        {
            "id": "claude-desktop",
            "name": "Claude Desktop",
            "blocks": [block("claude-desktop", "Add to claude_desktop_config.json:", json.dumps(desktop, indent=2))],
        },
        {
            "id": "cursor",
            "name": "Cursor",
            "blocks": [block("cursor", "Add to ~/.cursor/mcp.json:", json.dumps(cursor, indent=2))],
        },
        {
            "id": "vscode",
            "name": "VS Code",
            "blocks": [
                block("vscode", "Add to .vscode/mcp.json:", json.dumps({"servers": {"archivist": http}}, indent=2))
            ],
        },
    ]


def block(block_id: str, where: str, text: str) -> dict[str, str]:
    """One thing to copy: where it goes, and its text (the console gives each its own Copy button)."""
    return {"id": block_id, "where": where, "text": text}
