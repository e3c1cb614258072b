"""MCP tool: crawl_website (being written: see services/jobs.py)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from services.app import Runtime


def register(mcp: MCPServer, runtime: Runtime) -> None:
    """Registers nothing until the crawl job service lands."""
