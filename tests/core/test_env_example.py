"""`.env.example` names every setting (issue 28): derived from the settings model, so a setting added to
services/core/settings.py without a line (and a comment) in .env.example fails here, and so does a name in
.env.example that nothing reads."""

from __future__ import annotations

import re
from pathlib import Path

from services.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
#: settings read from the environment outside the settings model (services/access/secret_env.py, server.py)
READ_ELSEWHERE = {"ARCHIVIST_SECRET_ENV", "ARCHIVIST_PROFILES"}


def setting_names() -> set[str]:
    names = set()
    for name, field in Settings.model_fields.items():
        aliases = getattr(field.validation_alias, "choices", None)
        names.add(aliases[0] if aliases else f"ARCHIVIST_{name.upper()}")  # DATABASE_URL is read bare
    return names | READ_ELSEWHERE


def documented_names() -> list[str]:
    """Every `NAME=` line of .env.example, set or commented out."""
    return re.findall(r"^#? ?([A-Z][A-Z0-9_]*)=", (ROOT / ".env.example").read_text(), re.MULTILINE)


def test_every_setting_is_in_env_example() -> None:
    missing = setting_names() - set(documented_names())
    assert not missing, f".env.example lacks: {sorted(missing)}"


def test_env_example_names_only_settings_each_once() -> None:
    names = documented_names()
    assert not set(names) - setting_names(), f"not a setting: {sorted(set(names) - setting_names())}"
    assert len(names) == len(set(names)), [n for n in set(names) if names.count(n) > 1]


def test_each_setting_has_a_comment() -> None:
    """Each setting, or the group of settings it belongs to, follows a line of explanation."""
    lines = (ROOT / ".env.example").read_text().splitlines()
    setting = re.compile(r"^#? ?[A-Z][A-Z0-9_]*=")
    for i, line in enumerate(lines):
        if setting.match(line):
            above = i - 1
            while above >= 0 and setting.match(lines[above]):
                above -= 1
            assert above >= 0 and lines[above].startswith("# "), f"{line!r} has no comment above it"
