"""The console's shared machinery: rendering, the viewer, CSRF-checked forms and error pages."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from services.access.clients import client_entries
from services.access.disclosure import public_text
from services.access.gate import admitted, caller_from_token
from services.access.hosts import HostPolicy, is_loopback
from services.access.identity import NOBODY, Caller
from services.access.open_state import OpenDoor
from services.access.scope import current_scope
from services.app import Runtime
from services.core.errors import RateLimited, ServiceError
from services.core.settings import Settings
from web import auth, sso
from web.actions import AUDIT_TOOL, body_rule, measure_page
from web.render import build_environment

logger = logging.getLogger(__name__)
ADMIN_PATHS = ("/access", "/activity")

STATUS_BY_CODE = {
    "NOT_FOUND": 404,
    "CONFLICT": 409,
    "UNAVAILABLE": 503,
    "PERMISSION_DENIED": 403,
    "RATE_LIMITED": 429,
    "TIMEOUT": 504,
}
Handler = Callable[[Request], Awaitable[Response]]


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def came_from(request: Request) -> str:
    """The page asked for, query string included, to return to after signing in."""
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


#: where a person finds again what a console link pointed to, by the link's first path segment
WHERE_TO_LOOK = {
    "documents": "It may have been deleted, or the link is incomplete. Find the document on its source's page "
    "(Sources), or search for it.",
    "sources": "It may have been deleted, or the link is incomplete. See every source on the Sources page.",
    "jobs": "It may have been deleted with its source, or the link is incomplete. See the Jobs page.",
}


def for_a_person(path: str, exc: ServiceError) -> str:
    """The next step of a service error, for someone at the console: a missing item, or advice written
    for an agent (tool calls), becomes where to look in the console."""
    agent_advice = "(action=" in exc.suggestion or "_knowledge_base(" in exc.suggestion
    if exc.code != "NOT_FOUND" and not agent_advice:
        return exc.suggestion
    section = path.strip("/").split("/", 1)[0]
    return WHERE_TO_LOOK.get(section, "Go back to the Sources page and look for it there.")


class Console:
    """One per server: the runtime (services), settings, sessions and templates."""

    def __init__(self, runtime: Runtime, settings: Settings, host: str, tls: bool = False) -> None:
        self.runtime = runtime
        self.settings = settings
        self.off_loopback = not is_loopback(host)
        self.hosts = HostPolicy.for_server(host, settings.allowed_hosts)
        self.secure_cookies = tls or self.off_loopback  # Secure off loopback and over TLS
        self.sessions = auth.Sessions()
        self.env = build_environment()
        self.door = OpenDoor(settings, host, self.pool)

    async def pool(self) -> Any:
        return (await self.app()).db.pool

    async def app(self) -> Any:
        return await self.runtime.get()

    @property
    def sso_issuer(self) -> str | None:
        """The identity provider the sign-in page offers (web/sso.py), if any."""
        return sso.issuer_of(self.settings)

    async def source_choices(self) -> list[dict[str, Any]]:
        from services.documents.browse import BrowseService

        return await BrowseService((await self.app()).db).source_choices()

    async def viewer(self, request: Request) -> auth.Viewer:
        app = await self.app()
        available = auth.access_services(app) is not None
        # the one open-state predicate, as for /mcp: loopback, not relayed, and chosen or never secured
        required = not await self.door.admits(request.headers.get("host", ""), request.headers.keys())
        viewer = auth.Viewer(sign_in_required=required, access_available=available)
        secret = self.sessions.secret(request.cookies.get(auth.SESSION_COOKIE))
        if sso.is_sign_in(secret):  # signed in with the team's identity provider (web/sso.py)
            token = secret if secret.active else None
        else:
            token = await auth.verify(app, secret) if secret else None
        if token is not None:
            viewer.signed_in, viewer.token = True, token
        return viewer

    def render(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        viewer = getattr(request.state, "viewer", None) or auth.Viewer()
        mcp_url = f"{request.url.scheme}://{request.url.netloc}/mcp"
        needs_token = viewer.sign_in_required
        context.setdefault("clients", client_entries(self.settings, mcp_url, context.get("new_secret"), needs_token))
        html = self.env.get_template(template).render(
            request=request, viewer=viewer, csrf=auth.csrf_token(request), path=request.url.path, **context
        )
        response = HTMLResponse(html, status_code=status)
        auth.remember_csrf(request, response, self.secure_cookies)
        response.headers["Content-Security-Policy"] = (
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
        )
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        return response

    def error(self, request: Request, status: int, message: str, suggestion: str = "") -> HTMLResponse:
        """An error page; its text leaves the server, so no secrets or server paths are in it."""
        message, suggestion = public_text(message), public_text(suggestion)
        return self.render(request, "error.html", status=status, message=message, suggestion=suggestion, code=status)

    def set_cookie(self, response: Response, request: Request, name: str, value: str) -> None:
        auth.set_cookie(response, name, value, secure=auth.secure_cookie(request, self.secure_cookies))

    @staticmethod
    def caller_of(viewer: auth.Viewer) -> Caller:
        """Who is looking, built as for MCP calls (services/access/gate.caller_from_token): the signed-in
        token, the identity's grants, else the local owner at the console."""
        token = viewer.token
        if token is None and viewer.sign_in_required:  # a public page (sign-in) before signing in: nothing
            return caller_from_token(None, transport=NOBODY)
        if sso.is_sign_in(token):
            return caller_from_token(token.identity)
        # an open request (services/access/open_state.py) is the local owner at the console, as on /mcp
        return caller_from_token(token, transport="console", session="console")

    def route(
        self,
        path: str,
        handler: Handler,
        *,
        methods: Sequence[str] = ("GET",),
        write: bool = False,
        public: bool = False,
        body: str = "form",
    ) -> Route:
        """A console route whose body is bounded by its kind (web/actions.body_rule), as it streams."""
        rule = body_rule(body, self.settings.max_file_bytes)
        endpoint = self.page(handler, write=write, public=public, max_files=rule.max_files, max_bytes=rule.max_bytes)
        return Route(path, endpoint, methods=list(methods), max_body_size=rule.max_bytes)

    async def read_form(self, request: Request, max_files: int, max_bytes: int) -> FormData:
        """The form, within the route's limits: over-long bodies and file parts where none belong are refused."""
        try:
            return await request.form(max_files=max_files, max_fields=200, max_part_size=max_bytes)
        except HTTPException as exc:
            if exc.status_code == 413:
                raise Refused(413, f"The request is over this form's {max_bytes // 1024} KB limit.") from exc
            raise Refused(exc.status_code, f"The form was refused: {exc.detail}") from exc
        except MultiPartException as exc:
            raise Refused(400, f"The form was refused: {exc.message}") from exc

    def page(
        self,
        handler: Handler,
        *,
        write: bool = False,
        public: bool = False,
        max_files: int = 0,
        max_bytes: int = 16 * 1024,
    ) -> Handler:
        """Wrap a handler: sign-in gate, then (POST) bounded form, CSRF + read-only checks, rate limit and
        audit; service errors as pages."""

        async def endpoint(request: Request) -> Response:
            try:
                request.state.viewer = viewer = await self.viewer(request)
            except ServiceError as exc:
                return self.error(request, 503, exc.message, exc.suggestion)
            if viewer.sign_in_required and not viewer.signed_in and not public:
                if request.method != "GET":
                    return self.error(request, 401, "Sign in first.", "Paste an access token on the sign-in page.")
                return RedirectResponse(f"/signin?next={quote(came_from(request), safe='/')}", status_code=303)
            action = request.method == "POST" and not public
            request.state.failure = None
            limits = (max_files, max_bytes)

            async def run() -> Response:
                try:
                    return await self.run(request, handler, viewer, write=write, limits=limits)
                except Exception as exc:
                    return self.failed(request, exc)

            # the one gate of MCP calls: the scope for every page; for an action (a POST) one call from
            # the caller's rate bucket and one audit record, refusals included
            return await admitted(
                self.app,
                self.caller_of(viewer),
                AUDIT_TOOL,
                {"path": request.url.path},
                run,
                refuse=lambda exc: self.failed(request, exc),
                measure=lambda response, outcome: measure_page(request, response, outcome),
                action=handler.__name__,
                rate=action,
                audit=action,
            )

        return endpoint

    def failed(self, request: Request, exc: Exception) -> Response:
        """A refusal or failure as an error page (its message kept for the audit record)."""
        if isinstance(exc, Refused):
            hint = "Reload the page and try again." if exc.status == 403 else ""
            request.state.failure = exc.message
            return self.error(request, exc.status, exc.message, hint)
        if isinstance(exc, ServiceError):
            advice = for_a_person(request.url.path, exc)
            response = self.error(request, STATUS_BY_CODE.get(exc.code, 400), exc.message, advice)
            request.state.failure = exc.message
            if isinstance(exc, RateLimited) and exc.retry_after_seconds is not None:
                response.headers["Retry-After"] = str(max(1, round(exc.retry_after_seconds)))
            return response
        logger.error("console page %s failed", request.url.path, exc_info=exc)
        return self.error(request, 500, "The console hit an internal error.", "See the server's log.")

    async def run(
        self,
        request: Request,
        handler: Handler,
        viewer: auth.Viewer,
        *,
        write: bool,
        limits: tuple[int, int],
    ) -> Response:
        """Checks before the handler (a POST's form is read only now, once the caller is known), then
        the handler, inside the caller's scope (entered by the gate)."""
        scope = current_scope()
        viewer.scope_read_only = scope.read_only
        if request.method == "POST":
            form = await self.read_form(request, *limits)
            request.state.form = form
            if not auth.csrf_ok(request, _field(form, auth.CSRF_FIELD), self.hosts):
                raise Refused(403, "This form is stale or came from another site (CSRF check failed).")
            if write and scope.read_only:
                raise Refused(403, "This token is read-only: it cannot change the knowledge base.")
        if scope.source_ids is not None and request.url.path.startswith(ADMIN_PATHS):
            raise Refused(403, "A token limited to profiles cannot manage access or read the activity log.")
        return await handler(request)


def _field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def form_text(request: Request, name: str, default: str = "") -> str:
    return _field(request.state.form, name) or default


def form_int(request: Request, name: str, default: int) -> int:
    try:
        return int(form_text(request, name, str(default)))
    except ValueError:
        return default


def query_int(request: Request, name: str, default: int, low: int = 1, high: int = 10_000) -> int:
    try:
        return max(low, min(high, int(request.query_params.get(name, default))))
    except ValueError:
        return default
