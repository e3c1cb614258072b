"""The MCP registry entry (issue 28): `server.json` is valid against the registry's schema 2025-12-11
(vendored in tests/e2e/registry/, constraints only), names the package and version pyproject.toml builds,
offers only settings that exist, and the README carries the ownership marker the registry looks for in
the PyPI description (`mcp-name: <name>`)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema

from services.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "tests" / "e2e" / "registry" / "server.schema.2025-12-11.json"


def server_json() -> dict:
    return json.loads((ROOT / "server.json").read_text())


def test_server_json_is_valid_against_the_registry_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    entry = server_json()
    assert entry["$schema"] == schema["$id"]
    jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER).validate(entry)
    too_long = {**entry, "description": "x" * 101}
    assert not jsonschema.Draft7Validator(schema).is_valid(too_long)  # the schema does check what it says


def test_server_json_names_what_pyproject_builds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    entry = server_json()
    (package,) = entry["packages"]
    assert package["registryType"] == "pypi" and package["identifier"] == project["name"]
    assert entry["version"] == package["version"] == project["version"]
    assert package["transport"] == {"type": "stdio"}
    assert [a["value"] for a in package["packageArguments"]] == ["serve"]
    assert project["scripts"][project["name"]] == "cli:main"  # uvx runs the command named after the package


def test_environment_variables_are_settings() -> None:
    names = {f"ARCHIVIST_{field.upper()}" for field in Settings.model_fields} | {"DATABASE_URL"}
    offered = [v["name"] for v in server_json()["packages"][0]["environmentVariables"]]
    assert offered and set(offered) <= names, set(offered) - names


def test_readme_carries_the_registry_ownership_marker() -> None:
    marker = f"mcp-name: {server_json()['name']}"
    readme = (ROOT / "README.md").read_text()
    assert f"<!-- {marker} -->" in readme
