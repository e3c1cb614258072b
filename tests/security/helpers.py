"""Attack-suite plumbing: `archivist serve --http` in a thread of the test or in its own process (any
bind, TLS or not), raw httpx requests with hand-set Host, Origin and cookies, and a self-signed
certificate."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.served import served
from tests.support.web_helpers import ARCHIVIST, free_port

ATTACKER = "rebind.attacker.example"


def server_env(database_url: str, files_dir: Path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARCHIVIST_")}
    env.update(
        {
            "DATABASE_URL": database_url,
            "ARCHIVIST_ALLOWED_PATHS": str(files_dir),
            "ARCHIVIST_DATA_DIR": str(files_dir.parent / "security-data"),
            "ARCHIVIST_LOG_LEVEL": "WARNING",
            "ARCHIVIST_RUN_WORKER": "false",
            "HF_HUB_OFFLINE": "1",
            **overrides,
        }
    )
    return env


def http_server(
    env: dict[str, str], *args: str, scheme: str = "http", verify: Any = False
) -> AbstractContextManager[str]:
    """`archivist serve --http --port P *args` (in a thread: tests/support/served.py); yields the base URL
    (on 127.0.0.1) once /healthz answers 200."""
    return served(env, *args, scheme=scheme, ready="/healthz", verify=verify)


@contextmanager
def http_process(env: dict[str, str], *args: str, scheme: str = "http", verify: Any = False) -> Iterator[str]:
    """`archivist serve --http --port P *args` in its own process, for a test of what a process holds (its
    environment); yields the base URL (on 127.0.0.1) once /healthz answers 200."""
    port = free_port()
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
    proc = subprocess.Popen([ARCHIVIST, "serve", "--http", "--port", str(port), *args], env=env, stderr=log, text=True)
    base = f"{scheme}://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        with httpx.Client(timeout=2, verify=verify) as http:  # one for all the tries: ~55 ms of CPU to build
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"server exited: {log.read()[-3000:]}")
                try:
                    if http.get(f"{base}/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError("server did not start")
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def set_cookies(response: httpx.Response) -> dict[str, str]:
    """name -> the whole Set-Cookie line (flags included)."""
    return {line.split("=", 1)[0].strip(): line for line in response.headers.get_list("set-cookie")}


def cookie_value(line: str) -> str:
    return line.split("=", 1)[1].split(";", 1)[0]


def csrf_pair(base: str, path: str = "/signin", **headers: str) -> tuple[str, str]:
    """(csrf cookie value, the form's csrf field) from a console page."""
    page = httpx.get(f"{base}{path}", headers=headers, timeout=10)
    assert page.status_code == 200, page.status_code
    cookie = cookie_value(set_cookies(page)["archivist_csrf"])
    field = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert field is not None
    return cookie, field.group(1)


def sign_in(base: str, secret: str) -> str:
    """A session's Cookie header for `secret` (cookies set by hand: httpx keeps Secure ones for https only)."""
    cookie, field = csrf_pair(base)
    response = httpx.post(
        f"{base}/signin",
        data={"csrf": field, "token": secret, "next": "/"},
        headers={"Cookie": f"archivist_csrf={cookie}"},
        timeout=10,
    )
    assert response.status_code == 303, response.status_code
    session = cookie_value(set_cookies(response)["archivist_session"])
    return f"archivist_csrf={cookie}; archivist_session={session}"


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path
