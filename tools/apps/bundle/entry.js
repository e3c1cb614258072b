// What Archivist's results app (App, PostMessageTransport, theme helpers) and its browser-test host
// (AppBridge) use from the official MCP Apps SDK; bundled into ../ext-apps.js as the global McpApps.
export { App, PostMessageTransport, applyDocumentTheme, applyHostFonts, applyHostStyleVariables } from "@modelcontextprotocol/ext-apps";
export { AppBridge, buildAllowAttribute } from "@modelcontextprotocol/ext-apps/app-bridge";
