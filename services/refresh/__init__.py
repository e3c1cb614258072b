"""Refreshing a source by its kind: one call the edges make, whatever the source follows (service.py)."""

from services.refresh.service import SourceRefresh

__all__ = ["SourceRefresh"]
