"""Faults: lost databases, full disks, fuzzed arguments, signals."""
