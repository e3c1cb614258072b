"""Archivist's MCP App: search results and documents shown inside the chat (`io.modelcontextprotocol/ui`).

One `ui://` resource, served as `text/html;profile=mcp-app` through the SDK's Apps extension
(`mcp.server.apps.Apps`) and named by `_meta.ui.resourceUri` on `search_knowledge_base` and
`manage_document` (APP_META, passed to their `@mcp.tool`). A host that speaks the extension renders it
in a sandboxed iframe and hands it the tool's result; the page (apps/results.html) lists the results
with title, heading path, source, version, freshness and flags, opens a passage or a window of the whole
document, and copies a citation. It reaches the server only through the host (postMessage; every
further tool call goes back through the host, so it runs in the caller's own scope, rate limit and
audit, like any tool call), and follows the host's theme. Hosts without the extension ignore the
`_meta` and keep today's JSON: tool results are the same for everyone.

The page inlines the official bridge, @modelcontextprotocol/ext-apps, built into apps/ext-apps.js by
apps/bundle/ (`make app-bridge`; licences in apps/THIRD_PARTY_LICENSES.txt). Reading the resource is a
`resources/read`, so it passes the access gate (access/guard.py) like every other read.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from mcp.server.apps import Apps, ResourcePermissions

APP_URI = "ui://archivist/app"
#: the `_meta` of the tools whose results the app renders
APP_META = {"ui": {"resourceUri": APP_URI}}
HERE = Path(__file__).resolve().parent / "apps"
BRIDGE_SLOT = "/*MCP_APPS_BRIDGE*/"


@cache
def app_html() -> str:
    """The app page with the bridge inlined (a ui:// resource must be one self-contained document)."""
    page = (HERE / "results.html").read_text(encoding="utf-8")
    bridge = (HERE / "ext-apps.js").read_text(encoding="utf-8")
    if "</script" in bridge.lower():  # would end the inline script early
        raise ValueError("apps/ext-apps.js holds '</script': rebuild it with make app-bridge")
    return page.replace(BRIDGE_SLOT, bridge)


def apps_extension() -> Apps:
    """The Apps extension with Archivist's one UI resource (it asks the host for clipboard writes only)."""
    apps = Apps()
    apps.add_html_resource(
        APP_URI,
        app_html(),
        name="archivist-results",
        title="Archivist results",
        description="Search results and documents: open passages and documents, copy citations.",
        permissions=ResourcePermissions(clipboard_write={}),
        prefers_border=True,
    )
    return apps
