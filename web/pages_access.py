"""Console pages for access control: sign-in, profiles, tokens, "Connect a client", activity."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from services.access.profile_settings import MAX_DESCRIPTION, NAME_PATTERN
from web import auth
from web.core import Console, Refused, form_int, form_text, query_int


def items_of(listed: Any) -> list[Any]:
    return list(getattr(listed, "items", listed) or [])


def latency_points(entries: list[Any], width: int = 600, height: int = 120) -> dict[str, Any]:
    """An inline-SVG polyline of call latency over time (oldest left)."""
    values = []
    for e in entries:
        at, ms = getattr(e, "created_at", None) or getattr(e, "at", None), getattr(e, "latency_ms", None)
        if at is not None and ms is not None:
            values.append((at, float(ms)))
    values.sort(key=lambda v: v[0])
    if len(values) < 2:
        return {"points": "", "max_ms": values[0][1] if values else 0, "width": width, "height": height}
    t0, t1 = values[0][0].timestamp(), values[-1][0].timestamp()
    top = max(v for _, v in values) or 1.0
    span = (t1 - t0) or 1.0
    points = " ".join(
        f"{(at.timestamp() - t0) / span * width:.1f},{height - ms / top * (height - 10):.1f}" for at, ms in values
    )
    return {"points": points, "max_ms": top, "width": width, "height": height}


def routes(console: Console) -> list[Route]:
    async def services() -> tuple[Any, Any, Any, Any]:
        app = await console.app()
        return app, getattr(app, "profiles", None), getattr(app, "tokens", None), getattr(app, "audit", None)

    async def access(request: Request, new_secret: str | None = None, new_token: Any = None) -> Response:
        app, profiles, tokens, _ = await services()
        all_sources = await console.source_choices()
        return console.render(
            request,
            "access.html",
            available=profiles is not None and tokens is not None,
            profiles=items_of(await profiles.list()) if profiles is not None else [],
            tokens=items_of(await tokens.list()) if tokens is not None else [],
            sources=all_sources,
            source_titles={str(s["id"]): s["title"] for s in all_sources},
            new_secret=new_secret,
            new_token=new_token,
            name_pattern=NAME_PATTERN,  # the form accepts exactly the names the service accepts
            max_description=MAX_DESCRIPTION,
        )

    async def access_page(request: Request) -> Response:
        return await access(request)

    async def create_profile(request: Request) -> Response:
        _, profiles, _, _ = await services()
        if profiles is None:
            raise Refused(501, "Profiles are not available in this build.")
        form = request.state.form
        await profiles.create(
            name=form_text(request, "name").strip(),
            source_ids=[s for s in form.getlist("sources") if isinstance(s, str) and s],
            description=form_text(request, "description").strip(),
            read_only=form_text(request, "read_only") == "on",
        )
        return RedirectResponse("/access", 303)

    async def delete_profile(request: Request) -> Response:
        _, profiles, _, _ = await services()
        if profiles is None:
            raise Refused(501, "Profiles are not available in this build.")
        await profiles.delete(request.path_params["name"])
        return RedirectResponse("/access", 303)

    async def create_token(request: Request) -> Response:
        _, _, tokens, _ = await services()
        if tokens is None:
            raise Refused(501, "Tokens are not available in this build.")
        form = request.state.form
        days = form_int(request, "expires_days", 0)
        token, secret = await tokens.create(
            form_text(request, "name").strip(),
            [p for p in form.getlist("profiles") if isinstance(p, str) and p],
            form_text(request, "read_only") == "on",
            timedelta(days=days) if days > 0 else None,
            form_int(request, "rate_per_minute", 0) or None,
        )
        response = await access(request, new_secret=secret, new_token=token)
        response.headers["Cache-Control"] = "no-store"
        return response

    async def revoke_token(request: Request) -> Response:
        _, _, tokens, _ = await services()
        if tokens is None:
            raise Refused(501, "Tokens are not available in this build.")
        await tokens.revoke(request.path_params["token_id"])
        return RedirectResponse("/access", 303)

    async def activity(request: Request) -> Response:
        _, _, tokens, audit = await services()
        tool = request.query_params.get("tool") or None
        token = request.query_params.get("token") or None
        errors_only = request.query_params.get("errors") == "on"
        hours = query_int(request, "hours", 24, 1, 24 * 90)
        page = query_int(request, "page", 1)
        entries: list[Any] = []
        total = 0
        summary = None
        if audit is not None:
            result = await audit.query(timedelta(hours=hours), tool, token, errors_only, page, 20)
            entries = items_of(result)
            total = getattr(result, "total_count", len(entries))
            summary = await audit.summary(timedelta(hours=hours), tool, token)  # per profile and tool
        return console.render(
            request,
            "activity.html",
            available=audit is not None,
            entries=entries,
            total=total,
            tool=tool or "",
            token=token or "",
            errors_only=errors_only,
            hours=hours,
            page=page,
            chart=latency_points(entries),
            summary=summary,
            tokens=items_of(await tokens.list()) if tokens is not None else [],
            tools=["search_knowledge_base", "manage_document", "manage_source", "crawl_website", "console"],
        )

    async def signin(request: Request) -> Response:
        raw = form_text(request, "next", "/") if request.method == "POST" else request.query_params.get("next", "/")
        next_path = auth.safe_next(raw)
        if request.method == "GET":
            return console.render(request, "signin.html", next_path=next_path, failed=False, sso=console.sso_issuer)
        app = await console.app()
        secret = form_text(request, "token").strip()
        token = await auth.verify(app, secret)
        if token is None:
            return console.render(
                request, "signin.html", status=401, next_path=next_path, failed=True, sso=console.sso_issuer
            )
        # one bucket per token: its sign-ins cannot crowd the table nor anyone else's (web/auth.Sessions)
        await app.ratelimit.take(f"signin:{token.name}", auth.SIGNINS_PER_MINUTE)
        console.sessions.close(request.cookies.get(auth.SESSION_COOKIE))
        response = RedirectResponse(next_path, 303)
        session = console.sessions.open(secret, f"token:{token.name}")
        console.set_cookie(response, request, auth.SESSION_COOKIE, session)
        return response

    async def signout(request: Request) -> Response:
        console.sessions.close(request.cookies.get(auth.SESSION_COOKIE))
        response = RedirectResponse("/signin", 303)
        response.delete_cookie(auth.SESSION_COOKIE, path="/")
        return response

    return [
        console.route("/access", access_page),
        console.route("/access/profiles", create_profile, methods=["POST"], write=True),
        console.route("/access/profiles/{name}/delete", delete_profile, methods=["POST"], write=True),
        console.route("/access/tokens", create_token, methods=["POST"], write=True),
        console.route("/access/tokens/{token_id}/revoke", revoke_token, methods=["POST"], write=True),
        console.route("/activity", activity),
        console.route("/signin", signin, methods=["GET", "POST"], public=True),
        console.route("/signout", signout, methods=["POST"], public=True),
    ]
