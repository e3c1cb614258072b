"""A pinned connection keeps the host name for TLS: SNI and certificate checks use the name, not the IP.

Also the resolver hook: a resolver injected into the pinned client is asked once per connection and
its (checked) answer is the address connected to. An HTTPS server on 127.0.0.1 presents a certificate
for `pinned.test` only, signed by a throwaway CA the client trusts.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.net.safety import IPAddress
from tests.security.ssrf_support import PRIVATE, PUBLIC, pretend_public

x509 = pytest.importorskip("cryptography.x509", reason="cryptography is needed to make a test certificate")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

NAME = "pinned.test"


def _make_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed CA certificate valid for NAME only (chain file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


class _Handler(BaseHTTPRequestHandler):
    server: _TLSServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self.server.hosts.append(self.headers.get("Host", ""))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True
    hosts: list[str]
    sni: list[str | None]


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[_TLSServer, Path]]:
    cert_file, key_file = _make_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server = _TLSServer((PUBLIC, 0), _Handler)
    server.hosts, server.sni = [], []
    context.sni_callback = lambda _sock, name, _ctx: server.sni.append(name)  # type: ignore[assignment,func-returns-value]
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server, cert_file
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


async def test_pinned_tls_keeps_host_name_and_resolves_once(
    tls_server: tuple[_TLSServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.net.connector import pinned_client

    server, ca_file = tls_server
    port = int(server.server_address[1])
    pretend_public(monkeypatch)
    asked: list[str] = []

    async def rebinding_resolver(host: str, _port: int) -> list[IPAddress]:
        asked.append(host)
        return [ipaddress.ip_address(PUBLIC if len(asked) == 1 else PRIVATE)]

    trust = ssl.create_default_context(cafile=str(ca_file))
    async with pinned_client(allow_private=False, resolver=rebinding_resolver, verify=trust) as client:
        response = await client.get(f"https://{NAME}:{port}/")
        assert (response.status_code, response.text) == (200, "ok")
        assert server.sni == [NAME] and server.hosts == [f"{NAME}:{port}"]
        assert asked == [NAME]  # one lookup: the connection went to the answer that was checked

    # The certificate is still verified against the name: another name on the same address fails.
    async def same_address(host: str, _port: int) -> list[IPAddress]:
        return [ipaddress.ip_address(PUBLIC)]

    async with pinned_client(allow_private=False, resolver=same_address, verify=trust) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED|match"):
            await client.get(f"https://other.test:{port}/")


def test_pinned_git_pool_keeps_host_name_for_tls(
    tls_server: tuple[_TLSServer, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The urllib3 face (git): one look-up per connection, SNI, Host and the certificate on the name."""
    import urllib3

    from services.net.connector import PinnedPoolManager
    from tests.security.ssrf_support import RebindingDNS

    server, ca_file = tls_server
    port = int(server.server_address[1])
    pretend_public(monkeypatch)
    dns = RebindingDNS(monkeypatch, {NAME: [PUBLIC, PRIVATE], "other.test": [PUBLIC]})
    pool = PinnedPoolManager(allow_private=False, ca_certs=str(ca_file), retries=False)
    response = pool.request("GET", f"https://{NAME}:{port}/")
    assert (response.status, response.data) == (200, b"ok")
    assert server.sni == [NAME] and server.hosts == [f"{NAME}:{port}"]
    assert dns.lookups[NAME] == 1
    with pytest.raises(urllib3.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED|match"):
        pool.request("GET", f"https://other.test:{port}/")
