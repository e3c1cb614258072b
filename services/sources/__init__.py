"""Sources: named collections of documents (service.py), found by title only among the
caller's (titles.py), with their origin (origin.py) and versions (versions.py)."""
