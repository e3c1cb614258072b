"""The one module that reaches into the MCP SDK's private objects (mcp 2.3), for what its public API
cannot express. Everything else registers through `MCPServer`'s public methods (tools, resources,
prompts, middleware, custom routes).

What needs the low-level server, and why:
- `serve()`: a request handler of Archivist's own on `MCPServer`'s low-level `Server`, whose
  `add_request_handler` is public but which `MCPServer` keeps as `_lowlevel_server`. Used for
  `resources/list` with its cursor (`MCPServer.list_resources()` returns one unpaged list),
  `resources/subscribe`/`unsubscribe` for older clients (MCPServer serves neither) and
  `subscriptions/listen` wrapped with the subscription caps.
- `request_handler()`: the handler serving a method, if any (the access gate gates exactly the methods
  that have one, including any a future SDK adds).
- `connection_of()`: a request's client connection (its per-connection `state` and `exit_stack`, unwound
  when the client goes); the SDK builds a `ServerSession` per request and gives handlers no public way.

When the SDK grows a public way for one of these, the function here changes and nothing else does.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer


def serve(server: MCPServer[Any], method: str, params_type: type[Any], handler: Any) -> None:
    """Serve `method` with `handler(ctx, params)` (replacing the SDK's own handler, if any)."""
    server._lowlevel_server.add_request_handler(method, params_type, handler)


def request_handler(server: MCPServer[Any], method: str) -> Any:
    """The SDK's handler entry for `method` (`.handler`), or None when nothing serves it."""
    return server._lowlevel_server.get_request_handler(method)


def connection_of(ctx: Any) -> Any:
    """The client connection a low-level request came on (`state`, `exit_stack`)."""
    return ctx.session._connection
