"""Helpers the tests share (MCP clients, fixture sites, git servers); no tests here."""
