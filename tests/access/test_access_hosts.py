"""One loopback rule for every door (services/access/hosts.py): the /mcp gate that opens without a token,
the console's sign-in rule and `archivist config`'s guess for a server it cannot reach all read a host
alike. They used to be written three times and disagreed: `[::1]` was not loopback for /mcp, an empty
host (a bind to every interface) was loopback for the console, 127.0.0.2 was not for `config`."""

from __future__ import annotations

import pytest

from access.http_auth import AuthDb, AuthGate
from commands.config import wants_token_header
from services.access.hosts import is_loopback
from services.core.settings import Settings
from web.core import Console

HOSTS = [
    ("127.0.0.1", True),
    ("127.0.0.2", True),
    ("::1", True),
    ("[::1]", True),
    ("localhost", True),
    ("LOCALHOST", True),
    ("", False),  # a bind to every interface
    ("0.0.0.0", False),
    ("::", False),
    ("[::]", False),
    ("192.168.1.5", False),
    ("example.org", False),
]


@pytest.mark.parametrize(("host", "loopback"), HOSTS)
def test_every_door_reads_a_host_alike(host: str, loopback: bool) -> None:
    settings = Settings(_env_file=None)
    gate = AuthGate(AuthDb(settings), settings, host)
    console = Console(None, settings, host)  # type: ignore[arg-type]  # the rule reads no services
    doors = {"/mcp gate": gate.door.policy.loopback, "console": console.door.policy.loopback}
    assert {"hosts": is_loopback(host), **doors} == {
        "hosts": loopback,
        "/mcp gate": loopback,
        "console": loopback,
    }


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "[::1]", "localhost"])
def test_config_guesses_with_the_same_rule(host: str) -> None:
    """Nothing listens on port 1: `config` guesses from the host that no token header is needed."""
    assert wants_token_header(f"http://{host}:1/mcp", None) is False
