"""Who may call: the gate every MCP tool call and resource read passes (guard), bearer auth on HTTP."""
