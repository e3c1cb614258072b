"""Real git repositories served over smart HTTP on 127.0.0.1 (dulwich's WSGI server in a thread).

`GitServer.add(name)` makes a repository that tests commit to; `private=True` puts
it behind a wrapper answering 401 unless the request carries the token (HTTP basic, as the password,
or a bearer token).
"""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from dulwich.index import commit_tree
from dulwich.objects import Blob, Commit
from dulwich.repo import Repo
from dulwich.server import DictBackend
from dulwich.web import make_wsgi_chain

AUTHOR = b"Test <test@example.com>"
BRANCH = b"refs/heads/master"


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        logging.getLogger("tests.support.git_server").debug(format, *args)


class Repository:
    """A bare repository whose commits are built from a dict of files, so files a `.gitignore` names
    can be committed too: `commit({"a.md": "text", "old.md": None})` writes and deletes in one commit."""

    def __init__(self, path: Path) -> None:
        self.repo = Repo.init_bare(str(path), mkdir=True)
        self.files: dict[str, bytes] = {}

    def commit(self, files: dict[str, str | None], message: str = "change") -> str:
        for relative, text in files.items():
            if text is None:
                del self.files[relative]
            else:
                self.files[relative] = text.encode()
        store = self.repo.object_store
        entries = []
        for relative, data in sorted(self.files.items()):
            blob = Blob.from_string(data)
            store.add_object(blob)
            entries.append((relative.encode(), blob.id, 0o100644))
        commit = Commit()
        commit.tree = commit_tree(store, entries)
        commit.parents = [self.repo.refs[BRANCH]] if BRANCH in self.repo.refs else []
        commit.author = commit.committer = AUTHOR
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = message.encode()
        store.add_object(commit)
        self.repo.refs[BRANCH] = commit.id
        return commit.id.decode()

    def rename(self, old: str, new: str, text: str | None = None) -> str:
        """Move a file (optionally changing its text) in one commit."""
        content = self.files[old].decode() if text is None else text
        return self.commit({old: None, new: content}, f"rename {old} to {new}")


def require_token(app: Callable[..., Iterable[bytes]], token: str) -> Callable[..., Iterable[bytes]]:
    """A WSGI wrapper that answers 401 unless the token comes as a basic password or a bearer token."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        header = environ.get("HTTP_AUTHORIZATION", "")
        allowed = header == f"Bearer {token}"
        if header.startswith("Basic "):
            _, _, password = base64.b64decode(header[6:]).decode().partition(":")
            allowed = password == token
        if not allowed:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)

    return guarded


class GitServer:
    """Serves repositories at http://127.0.0.1:PORT/<name>.git until `close()`."""

    def __init__(self, root: Path, token: str) -> None:
        self.root = root
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.private: set[str] = set()
        self.requests: list[tuple[str, str]] = []  # (path, Authorization header) of every request
        self.redirects: dict[str, str] = {}  # "<name>.git" -> the base URL its requests are redirected to
        public = make_wsgi_chain(DictBackend(self.repos))
        guarded = require_token(public, token)

        def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            self.requests.append((path, environ.get("HTTP_AUTHORIZATION", "")))
            name, _, rest = path.lstrip("/").partition("/")
            if name in self.redirects:
                query = environ.get("QUERY_STRING", "")
                location = f"{self.redirects[name]}/{rest}" + (f"?{query}" if query else "")
                start_response("301 Moved Permanently", [("Location", location), ("Content-Length", "0")])
                return [b""]
            return (guarded if name in self.private else public)(environ, start_response)

        self.server: WSGIServer = make_server("127.0.0.1", 0, route, handler_class=QuietHandler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="git-server", daemon=True)
        self.thread.start()

    def add(self, name: str, private: bool = False) -> Repository:
        repository = Repository(self.root / name)
        self.repos[f"/{name}.git"] = repository.repo
        if private:
            self.private.add(f"{name}.git")
        return repository

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/{name}.git"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
        for repo in self.repos.values():
            repo.close()


class ServerProcess:
    """The bare repositories under `root` served by this module in a process of its own (one per
    folder, at /<folder>.git): what the server costs (dulwich inflates every object it packs) is then
    not counted in a test that measures the client's memory."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.git_server", str(root)],
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}.git"

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def serve(root: Path) -> None:
    """Serve every bare repository under `root` until killed; the port goes to stdout first."""
    server = GitServer(root, token="")
    for path in sorted(root.iterdir()):
        server.repos[f"/{path.name}.git"] = Repo(str(path))
    print(server.server.server_port, flush=True)
    server.thread.join()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
