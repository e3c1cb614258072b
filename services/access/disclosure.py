"""What text may leave the process: error messages sent over HTTP carry no server paths and no
secrets, and log records no secrets. The secret patterns are services/access/redaction.py's (the one
redaction); this module adds file-system paths, the HTTP switch and the log filter.

The path pattern is linear: one character class after a fixed prefix, nothing nested."""

from __future__ import annotations

import logging
import re

from services.access.redaction import redact_text

PATH_MASK = "<path>"
#: An absolute POSIX path of two or more segments, not part of a URL (no word, '.', ':', '/' before it).
_PATH = re.compile(r"(?<![\w.:/~-])/[\w.@+~-]{1,255}/[^\s'\"<>,;()\[\]{}]{0,4096}")

_remote_errors = False


def strip_paths(text: str) -> str:
    """`text` with absolute file-system paths replaced by `<path>` (URLs are left alone)."""
    return _PATH.sub(PATH_MASK, text)


def public_text(text: str) -> str:
    """Text fit to leave the server over HTTP: no secrets, no server paths."""
    return strip_paths(redact_text(text))


def set_remote_errors(on: bool = True) -> None:
    """This process answers over HTTP: its error messages leave without server paths (stdio keeps them)."""
    global _remote_errors
    _remote_errors = on


def outgoing_text(text: str) -> str:
    """An error message as it leaves this process (see set_remote_errors); never with secrets."""
    return public_text(text) if _remote_errors else redact_text(text)


class RedactingFilter(logging.Filter):
    """A log filter that redacts each record's final message (installed on the handlers)."""

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
    """Redact secrets in every record the logger's handlers write (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
