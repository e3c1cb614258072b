"""Folder and git sources (services/sync/)."""
