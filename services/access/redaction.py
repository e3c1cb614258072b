"""One redaction for secrets and server paths, wherever text leaves the process: client configs, the
console's "Connect a client" dialog, logs, `/healthz` and error messages sent over HTTP.

Every pattern here is linear: no nested or overlapping quantifiers, so hostile text of any length
costs one pass."""

from __future__ import annotations

import logging
import re
from typing import Any

MASK = "***"
PATH_MASK = "<path>"
#: Keys whose values are secrets whatever their length (matched inside longer keys: db_password, x-api-key).
SECRET_KEYS = ("password", "passwd", "pwd", "secret", "token", "authorization", "api_key", "apikey", "cookie")

#: scheme://user:password@host: the password part.
_USERINFO = re.compile(r"://([^\s:/@]*):([^\s@/]+)@")
#: ?password=x, &token=x, libpq `password=x` or `password='x y'` (key=value DSNs).
_KEY_VALUE = re.compile(
    r"(?i)(?<![A-Za-z0-9])(password|passwd|pass|pwd|pw|secret|token|api[_-]?key|access[_-]?token|sslpassword)"
    r"(\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&;'\"]+)"
)
#: Authorization: Bearer <secret>, and Archivist's own token secrets.
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]+")
_TOKEN = re.compile(r"\barch_[A-Za-z0-9_-]{8,}")
#: An absolute POSIX path of two or more segments, not part of a URL (no word, '.', ':', '/' before it).
_PATH = re.compile(r"(?<![\w.:/~-])/[\w.@+~-]+/[^\s'\"<>,;()\[\]{}]*")

_remote_errors = False


def redact_text(text: str, mask: str = MASK) -> str:
    """`text` with passwords in URLs and DSNs, bearer secrets and token secrets replaced by `mask`."""
    text = _USERINFO.sub(lambda m: f"://{m.group(1)}:{mask}@", text)
    text = _KEY_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{mask}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{mask}", text)
    return _TOKEN.sub(mask, text)


def is_secret_key(key: str) -> bool:
    lowered = key.lower().replace("-", "_")
    return any(name in lowered for name in SECRET_KEYS)


def redact(obj: Any) -> Any:
    """A copy of nested dicts/lists with secret-keyed values masked and every string redacted."""
    if isinstance(obj, dict):
        return {k: MASK if isinstance(k, str) and is_secret_key(k) else redact(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def strip_paths(text: str) -> str:
    """`text` with absolute file-system paths replaced by `<path>` (URLs are left alone)."""
    return _PATH.sub(PATH_MASK, text)


def public_text(text: str) -> str:
    """Text fit to leave the server over HTTP: no secrets, no server paths."""
    return strip_paths(redact_text(text))


def set_remote_errors(on: bool = True) -> None:
    """This process answers over HTTP: error messages leave without server paths (stdio keeps them)."""
    global _remote_errors
    _remote_errors = on


def outgoing_text(text: str) -> str:
    """An error message as it leaves this process (see set_remote_errors)."""
    return public_text(text) if _remote_errors else redact_text(text)


class RedactingFilter(logging.Filter):
    """A log filter that redacts each record's final message (install it on the handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        redacted = redact_text(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Redact secrets in every record the logger's handlers write."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
