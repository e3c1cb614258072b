"""The web console (web/) in a real browser."""
