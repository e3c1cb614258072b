"""Tests of scripts/: the replayable moves of issue 31 (scripts/rooms.py)."""
