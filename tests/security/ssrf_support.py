"""Helpers for the SSRF attack tests: a trap server, a rebinding DNS, a "public" loopback address.

All traffic stays on loopback. 127.0.0.1 plays the public site (the guard is told it is public) and
127.0.0.2 plays the private target (a trap that records every request it receives). A rebinding DNS
answers a name with 127.0.0.1 on the first lookup and 127.0.0.2 on every later one, at the level of
`socket.getaddrinfo`, which the guard's resolver and httpx/anyio both use: so the old check-then-connect
code sends its request to the trap, and a pinned connection never asks twice.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from services.net import safety

PUBLIC = "127.0.0.1"  # the address the tests pretend is public
PRIVATE = "127.0.0.2"  # a loopback address the guard refuses; the trap listens here


class _TrapHandler(BaseHTTPRequestHandler):
    server: _TrapServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self.server.hits.append(self.path)
        body = b"<html><body><h1>Internal secret</h1><p>trap reached</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _TrapServer(ThreadingHTTPServer):
    daemon_threads = True
    hits: list[str]


class Trap:
    """An HTTP server on a private address that records the path of every request it receives."""

    def __init__(self, host: str = PRIVATE, port: int = 0) -> None:
        self._server = _TrapServer((host, port), _TrapHandler)
        self._server.hits = []
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def hits(self) -> list[str]:
        return self._server.hits

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def __enter__(self) -> Trap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class RebindingDNS:
    """Patches `socket.getaddrinfo`: listed names answer their scripted addresses, one per lookup.

    `answers[name]` is a list of addresses; lookup n gets item n (the last one repeats). Other names
    go to the real resolver. `lookups` counts the lookups of each listed name.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.lookups: Counter[str] = Counter()
        self._real = socket.getaddrinfo
        monkeypatch.setattr(socket, "getaddrinfo", self._getaddrinfo)

    def _getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in self.answers:
            return self._real(host, port, *args, **kwargs)
        script = self.answers[name]
        address = script[min(self.lookups[name], len(script) - 1)]
        self.lookups[name] += 1
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sockaddr: tuple[Any, ...] = (
            (address, int(port or 0), 0, 0) if family == socket.AF_INET6 else (address, int(port or 0))
        )
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr)]


def pretend_public(monkeypatch: pytest.MonkeyPatch, address: str = PUBLIC) -> None:
    """Make the SSRF guard treat `address` as public; every other address keeps the real rules."""
    real = safety.address_class

    def address_class(candidate: Any) -> str | None:
        return None if str(candidate) == address else real(candidate)

    monkeypatch.setattr(safety, "address_class", address_class)
