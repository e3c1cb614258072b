"""The HTTP server's edges as clients and people meet them (issue 28), against a real `archivist serve
--http`: no OAuth metadata without ARCHIVIST_OAUTH_ISSUER (a 401 says a bearer token is needed), a client
hanging up mid-request is one short log line, and `archivist config --http` checks that the URL is an MCP
endpoint, with notes that agree. Plus the stdio entries: the working directory is never put into
ARCHIVIST_ALLOWED_PATHS without a word, and `--uvx` / `--pipx` print the isolated-install form."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.test_cli import ROOT, archivist, cli_env, free_port
from tests.support.cli_process import run_in_process
from tests.support.web_helpers import console_process

METADATA = ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp")


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    files = tmp_path_factory.mktemp("edges")
    log = files / "server.log"
    with console_process(database_url, files, log_path=log, ARCHIVIST_LOG_LEVEL="INFO") as base:  # its log is read
        env = cli_env(DATABASE_URL=database_url, ARCHIVIST_DATA_DIR=str(files.parent / "web-data"))
        yield {"base": base, "env": env, "log": log}


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_no_authorization_server_is_advertised_without_an_issuer(server: dict[str, Any]) -> None:
    base, env = server["base"], server["env"]
    for path in METADATA:
        assert httpx.get(base + path).status_code == 404, path
    created = archivist("token", "create", "--name", "edge", env=env).stdout
    server["secret"] = next(word for word in created.split() if word.startswith("arch_"))
    refused = httpx.post(f"{base}/mcp", json=INITIALIZE, headers=HEADERS)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata" not in challenge, challenge
    assert "bearer token" in challenge and "archivist token create" in challenge, challenge
    assert "bearer token" in refused.json()["error_description"]
    for path in METADATA:
        assert httpx.get(base + path).status_code == 404, path
    bearer = {"Authorization": f"Bearer {server['secret']}"}
    welcome = httpx.post(f"{base}/mcp", json=INITIALIZE, headers={**HEADERS, **bearer})
    assert welcome.status_code == 200


def test_a_client_hanging_up_is_one_short_line(server: dict[str, Any]) -> None:
    host, port = server["base"].removeprefix("http://").split(":")
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {server['secret']}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        'Content-Length: 5000\r\n\r\n{"jsonrpc": '
    )
    for _ in range(2):
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(request.encode())
            time.sleep(0.5)
    deadline = time.monotonic() + 10
    while server["log"].read_text().count("disconnected") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    log = server["log"].read_text()
    assert log.count("a client disconnected before its request was read") == 2, log[-3000:]
    assert "Traceback" not in log and "ClientDisconnect" not in log and " ERROR " not in log, log[-3000:]


def test_config_http_refuses_a_url_that_is_not_mcp(server: dict[str, Any]) -> None:
    done = archivist("config", "claude-code", "--http", server["base"] + "/", env=server["env"], check=False)
    assert done.returncode == 1 and "not as an MCP endpoint" in done.stderr, done.stderr
    assert f"--http {server['base']}/mcp" in done.stderr and "Traceback" not in done.stderr
    good = archivist("config", "claude-code", "--http", server["base"] + "/mcp", env=server["env"])
    entry = json.loads(good.stdout)["mcpServers"]["archivist"]
    assert entry["headers"] == {"Authorization": "Bearer ${ARCHIVIST_TOKEN}"}  # a token exists now


def test_config_http_with_the_server_down_says_one_thing(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    done = archivist("config", "cursor", "--http", url, env=cli_env())
    notes = [line for line in done.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "could not reach" in notes[0], done.stderr
    assert "accepts clients without a token" not in done.stderr
    assert json.loads(done.stdout)["mcpServers"]["archivist"] == {"url": url}


def stdio_entry(*args: str, env: dict[str, str], cwd: Path) -> tuple[dict[str, Any], str]:
    """`archivist config ARGS` run from `cwd` (through cli.main in this process)."""
    done = run_in_process(["config", *args], {**env, "PYTHONPATH": str(ROOT)}, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["mcpServers"]["archivist"], done.stderr


def test_config_never_adds_the_working_directory_silently(tmp_path: Path) -> None:
    entry, stderr = stdio_entry("claude-desktop", env=cli_env(), cwd=tmp_path)
    assert "ARCHIVIST_ALLOWED_PATHS" not in entry["env"], entry
    assert str(tmp_path) not in json.dumps(entry)
    assert "ARCHIVIST_ALLOWED_PATHS is not set" in stderr and "--allow" in stderr
    notes = tmp_path / "notes"
    entry, stderr = stdio_entry("claude-desktop", "--allow", str(notes), env=cli_env(), cwd=tmp_path)
    assert entry["env"]["ARCHIVIST_ALLOWED_PATHS"] == str(notes) and stderr == ""


def test_config_prints_the_uvx_and_pipx_forms(tmp_path: Path) -> None:
    spec = "git+https://example.com/archivist"
    entry, _ = stdio_entry("claude-code", "--uvx", spec, "--allow", str(tmp_path), env=cli_env(), cwd=tmp_path)
    assert (entry["type"], entry["command"], entry["args"]) == ("stdio", "uvx", ["--from", spec, "archivist", "serve"])
    entry, _ = stdio_entry("claude-desktop", "--pipx", spec, "--allow", str(tmp_path), env=cli_env(), cwd=tmp_path)
    assert (entry["command"], entry["args"]) == ("pipx", ["run", "--spec", spec, "archivist", "serve"])


def test_replies_are_not_held_back_by_nagle() -> None:
    """The socket `archivist serve --http` listens on must give asyncio's accepted connections
    TCP_NODELAY: without it every reply waited ~40 ms for a delayed ACK (found by bench/ab_latency.py)."""
    import asyncio
    import socket

    from commands.serve import listening_socket

    async def accepted_nodelay() -> int:
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_client, sock=listening_socket("127.0.0.1", 0))
        port = server.sockets[0].getsockname()[1]
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            value = await asyncio.wait_for(seen, 5)
            writer.close()
        return value

    assert asyncio.run(accepted_nodelay()) == 1
