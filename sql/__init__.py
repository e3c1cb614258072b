"""The schema migrations (NNN_name.sql, applied in order at start-up by services/core/database.py).

A package only so the wheel carries the .sql files as package data and an installed server finds them
with importlib.resources, outside any checkout.
"""
