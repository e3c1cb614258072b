"""One redaction for secrets everywhere: the audit log, logs, the console, `archivist config`, errors.

`redact(obj)` walks dicts, lists and tuples to any depth: the value of any key that names a secret
(password, token, secret, authorization, api_key, cookie, credential, private_key, dsn, ...) becomes
"[redacted]", however short, and every other string goes through `redact_text`.

`redact_text(text)` removes secrets written inside text:
- URL credentials: `postgresql://user:pass@host/db` -> `postgresql://user:[redacted]@host/db`;
- `key=value` and `key: value` pairs, as in query strings and DSNs: `?password=x`, `password=x`,
  `sslpassword='x'`, `api_key: x`;
- bearer credentials (`Bearer x`) and Archivist token secrets (`arch_...`).

Every pattern is linear: bounded repetitions of single character classes, nothing nested.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[redacted]"
#: key names whose values are secrets, wherever they appear (case-insensitive, any separator)
SECRET_KEY = re.compile(
    r"pass(?:word|wd|phrase)?|pwd|token|secret|authori[sz]ation|api[-_]?key|apikey|cookie|credential"
    r"|private[-_]?key|session[-_]?id|dsn|database[-_]?url|headers",
    re.IGNORECASE,
)
#: scheme://user:password@  (the password part)
URL_CREDENTIALS = re.compile(r"(://[^\s:/@?#]{0,256}):([^\s@/?#]{1,512})@")
#: key=value / key: value, where the key names a secret (the value up to a separator)
SECRET_PAIR = re.compile(
    r"(?i)\b([a-z_-]{0,32}(?:password|passwd|pwd|token|secret|api[-_]?key|apikey|authorization|cookie)"
    r"[a-z_-]{0,32})(\s{0,4}[=:]\s{0,4})(['\"]?)([^\s&;,'\"]{1,2048})"
)
BEARER = re.compile(r"(?i)\b(bearer|basic)\s{1,4}[A-Za-z0-9._~+/=-]{1,4096}")
ARCHIVIST_SECRET = re.compile(r"\barch_[A-Za-z0-9_-]{8,256}")
#: texts longer than this are cut before matching (nothing stored or logged is this long)
MAX_TEXT = 1_000_000


def is_secret_key(key: object) -> bool:
    return isinstance(key, str) and SECRET_KEY.search(key) is not None


def redact_text(text: str) -> str:
    """`text` with credentials in URLs, secret key=value pairs, bearer and Archivist secrets replaced."""
    if not text:
        return text
    text = text[:MAX_TEXT]
    text = URL_CREDENTIALS.sub(rf"\1:{REDACTED}@", text)
    text = BEARER.sub(rf"\1 {REDACTED}", text)  # before pairs: `Authorization: Bearer x` keeps no x
    text = SECRET_PAIR.sub(rf"\1\2\3{REDACTED}", text)
    return ARCHIVIST_SECRET.sub(REDACTED, text)


def redact(obj: Any) -> Any:
    """A copy of `obj` with every secret-named key's value (at any depth) and every secret in text
    replaced by "[redacted]". Other values are returned as they are."""
    if isinstance(obj, dict):
        return {key: REDACTED if is_secret_key(key) else redact(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact(item) for item in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj
