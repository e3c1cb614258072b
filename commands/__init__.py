"""The command line's commands, one module per family; cli.py parses and dispatches."""
