"""The MCP tools (tools/) through real MCP clients: the contract agents see."""
