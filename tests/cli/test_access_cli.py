"""`archivist config` without secrets; `archivist token|profile|audit` through the CLI's entry function
(in this process: tests/support/cli_process.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_e2e import server_env
from tests.support.cli_process import run_in_process

CLIENTS = ["claude-code", "claude-desktop", "cursor", "vscode"]


def test_configs_parse_and_hold_no_secret(database_url: str, files_dir: Path) -> None:
    env = server_env(database_url, files_dir)
    env["DATABASE_URL"] = "postgresql://archuser:s3cretpw@127.0.0.1:5432/kb"
    for client in CLIENTS:
        for extra in ([], ["--http", "http://127.0.0.1:8000/mcp", "--token-header"], ["--profile", "docs"]):
            done = run_in_process(["config", client, *extra], env)
            assert done.returncode == 0, done.stderr
            parsed = json.loads(done.stdout)
            text = json.dumps(parsed)
            assert "s3cretpw" not in text and "arch_" not in text
            assert "archivist" in text
            if extra[:1] == ["--http"]:
                assert "http://127.0.0.1:8000/mcp" in text and "Bearer $" in text
            elif extra:
                assert "ARCHIVIST_PROFILES" in text


def test_token_profile_audit_cli(database_url: str, files_dir: Path) -> None:
    env = server_env(database_url, files_dir)
    made = run_in_process(["profile", "create", "cli-docs", "--description", "CLI docs", "--read-only"], env)
    assert made.returncode == 0, made.stderr
    assert "cli-docs" in run_in_process(["profile", "list"], env).stdout
    created = run_in_process(["token", "create", "--name", "cli-t", "--profile", "cli-docs", "--expires", "1d"], env)
    assert created.returncode == 0, created.stderr
    secret = next(w for w in created.stdout.split() if w.startswith("arch_"))
    listed = run_in_process(["token", "list"], env).stdout
    assert "cli-t" in listed and "active" in listed and secret not in listed
    assert "revoked" in run_in_process(["token", "revoke", "cli-t"], env).stdout
    audit = run_in_process(["audit", "--since", "1h"], env)
    assert audit.returncode == 0 and "entries" in audit.stdout
    bad = run_in_process(["token", "create", "--name", "x", "--profile", "nope"], env)
    assert bad.returncode == 1 and "nope" in bad.stderr  # a failure (unknown profile), not a usage error


def test_profile_output_settings_cli(database_url: str, files_dir: Path) -> None:
    """Issue 32.1: `profile create|update --snippet-chars N --hit-fields LIST` (checked by the service)."""
    env = server_env(database_url, files_dir)
    made = run_in_process(
        ["profile", "create", "cli-out", "--snippet-chars", "250", "--hit-fields", "metadata,score"], env
    )
    assert made.returncode == 0, made.stderr
    assert "250 chars; metadata, score" in made.stdout and "no sources" in made.stdout
    bad = run_in_process(["profile", "update", "cli-out", "--hit-fields", "metadata,password"], env)
    assert bad.returncode != 0 and "password" in bad.stderr
    cleared = run_in_process(["profile", "update", "cli-out", "--snippet-chars", "0", "--hit-fields", "default"], env)
    assert cleared.returncode == 0, cleared.stderr
    shown = json.loads(run_in_process(["profile", "show", "cli-out", "--json"], env).stdout)
    assert (shown["snippet_chars"], shown["hit_fields"]) == (None, None)


def test_a_local_wheel_in_uvx_and_pipx_becomes_an_absolute_path(database_url: str, files_dir: Path) -> None:
    """A client starts the server from its own folder: `../dist/x.whl` would name nothing there."""
    env = server_env(database_url, files_dir)
    root = Path(__file__).resolve().parents[2]
    for flag in ("--uvx", "--pipx"):
        done = run_in_process(["config", "claude-desktop", flag, "../dist/x.whl"], env)
        assert done.returncode == 0, done.stderr
        args = json.loads(done.stdout)["mcpServers"]["archivist"]["args"]
        assert str((root / "../dist/x.whl").resolve()) in args and "../dist/x.whl" not in args, args
    named = run_in_process(["config", "claude-desktop", "--uvx", "git+https://example.org/o/archivist"], env)
    assert "git+https://example.org/o/archivist" in json.loads(named.stdout)["mcpServers"]["archivist"]["args"]


def test_the_consoles_desktop_entry_never_sets_an_empty_allowed_paths(database_url: str, files_dir: Path) -> None:
    """An HTTP server's settings hold no allowed path when none was chosen; its stdio entry must leave the
    variable out (an empty one makes the stdio server refuse every file), as `archivist config` does."""
    from services.access.clients import client_entries
    from services.core.settings import Settings

    http_settings = Settings(database_url=database_url).for_http()
    entries = client_entries(http_settings, "http://127.0.0.1:8000/mcp", None, needs_token=False)
    desktop = next(e for e in entries if "claude_desktop" in json.dumps(e) or "claude-desktop" in json.dumps(e))
    text = json.dumps(desktop)
    assert "ARCHIVIST_ALLOWED_PATHS" not in text, text


def test_cli_commands_pass_the_one_gate_and_are_audited(database_url: str, files_dir: Path) -> None:
    env = server_env(database_url, files_dir)
    assert run_in_process(["search", "gate-probe-words"], env).returncode == 0
    assert run_in_process(["sources", "list"], env).returncode == 0
    missing = run_in_process(["documents", "get", "00000000-0000-0000-0000-000000000000"], env)
    assert missing.returncode == 1
    for _ in range(2):  # reading the log is not itself recorded
        audit = run_in_process(["audit", "--since", "1h", "--tool", "cli", "--json"], env)
        assert audit.returncode == 0, audit.stderr
    entries = json.loads(audit.stdout)["items"]
    seen = {(e["action"], e["error_code"]) for e in entries if e["who"] == "cli"}
    assert ("search", None) in seen and ("sources list", None) in seen
    assert ("documents get", "NOT_FOUND") in seen
    assert not any(e["action"] == "audit" for e in entries)
    searched = next(e for e in entries if e["action"] == "search")
    assert "gate-probe-words" in json.dumps(searched["arguments"])
