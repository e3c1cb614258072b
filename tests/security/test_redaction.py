"""The one redaction (issue 23, point 2) and the host rules, as functions: every secret shape the issue
names, nested and short secrets, server paths, hostile lengths, and the cookie flag off loopback."""

from __future__ import annotations

import time

from starlette.requests import Request

from services.access.disclosure import public_text, strip_paths
from services.access.hosts import HostPolicy
from services.access.redaction import REDACTED, redact, redact_text
from web.auth import secure_cookie

PW = "hunter2-Very-Secret"


def test_every_dsn_shape_loses_its_password() -> None:
    shapes = [
        f"postgresql://app:{PW}@db.internal:5432/kb",
        f"postgresql://db.internal/kb?user=app&password={PW}&sslmode=require",
        f"postgresql://db.internal/kb?password={PW}",
        f"host=db.internal port=5432 user=app password={PW} dbname=kb",
        f"host=db.internal password='{PW}' dbname=kb",
        f"Authorization: Bearer {PW}",
    ]
    for text in shapes:
        redacted = redact_text(text)
        assert PW not in redacted, redacted
        assert "db.internal" in redacted or text.startswith("Authorization")  # the rest stays readable


def test_nested_and_short_secrets() -> None:
    data = {"a": [{"password": "x"}, {"db": {"api_key": "k", "Token": "t1", "note": f"password={PW}"}}], "n": 3}
    out = redact(data)
    assert out["a"][0]["password"] == REDACTED and out["a"][1]["db"]["api_key"] == REDACTED
    assert out["a"][1]["db"]["Token"] == REDACTED and out["n"] == 3
    assert PW not in str(out) and data["a"][0]["password"] == "x"  # a copy


def test_server_paths_are_stripped_but_urls_are_not() -> None:
    text = "Use a file under one of: /srv/kb/notes, /home/alice/docs (see https://example.com/a/b)"
    cleaned = strip_paths(text)
    assert "/srv/kb" not in cleaned and "/home/alice" not in cleaned
    assert "https://example.com/a/b" in cleaned
    assert "alice" not in public_text(f"postgresql://u:{PW}@h/db failed at /home/alice/x.py")


def test_hostile_lengths_take_linear_time() -> None:
    hostile = [
        "://" + "a" * 50_000,
        "password=" * 10_000,
        "/a" * 30_000,
        "postgresql://" + ":" * 50_000,
        "bearer " * 10_000,
        " /" + "x/" * 30_000 + "'",
    ]
    for text in hostile:
        started = time.perf_counter()
        public_text(text)
        assert time.perf_counter() - started < 0.2, text[:20]


def test_origin_is_checked_against_the_allow_list_not_the_host() -> None:
    policy = HostPolicy.for_server("127.0.0.1", ["kb.example.com"])
    assert policy.allows_origin("http://127.0.0.1:8765", "127.0.0.1:8765", "http")
    assert policy.allows_origin("https://kb.example.com", "127.0.0.1:8765", "http")  # behind a TLS proxy
    assert not policy.allows_origin("http://evil.example:8765", "evil.example:8765", "http")  # Origin = Host
    assert not policy.allows_origin("http://localhost:3000", "localhost:8765", "http")  # another local app
    assert not policy.allows_origin("null", "127.0.0.1:8765", "http")
    assert policy.allows_host("[::1]:8765") and policy.allows_host("KB.example.com:443")
    assert not policy.allows_host("evil.example") and not policy.allows_host("kb.example.com.evil.example")
    assert HostPolicy.for_server("127.0.0.1", ["*", "*.example.com"]).names == ["127.0.0.1", "[::1]", "localhost"]


def request_for(scheme: str, host: str) -> Request:
    return Request(
        {"type": "http", "scheme": scheme, "method": "GET", "path": "/", "headers": [(b"host", host.encode())]}
    )


def test_cookie_is_secure_off_loopback_and_over_tls() -> None:
    assert secure_cookie(request_for("http", "kb.example.com"), True)  # served off loopback
    assert secure_cookie(request_for("https", "kb.example.com"), False)
    assert secure_cookie(request_for("http", "127.0.0.1:8765"), False)  # browsers keep it on localhost
    assert not secure_cookie(request_for("http", "kb.example.com"), False)


def test_log_records_lose_their_secrets() -> None:
    import io
    import logging

    from services.access.disclosure import RedactingFilter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("archivist.test-redaction")
    log.addHandler(handler)
    try:
        log.warning("cannot connect to %s", f"postgresql://app:{PW}@db.internal/kb")
    finally:
        log.removeHandler(handler)
    assert PW not in stream.getvalue() and "db.internal" in stream.getvalue()
