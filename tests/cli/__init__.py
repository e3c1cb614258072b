"""The `archivist` command line (cli.py, commands/) through the real process."""
