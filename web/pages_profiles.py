"""Console pages for one profile: edit it (description, search defaults, enabled, its sources in search
order, the output settings of its hits) and switch it on or off from the list.

Owner only, like every /access page: a token limited to profiles is refused (web/core.ADMIN_PATHS), a
read-only one cannot post, and each post is CSRF-checked, rate-limited and audited by Console.page. The
form is drawn from services/access/profile_settings (name pattern, choices, ranges) and posts to
ProfileService.update, which checks every value: one validation, whichever door a change comes by."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from models import SEARCH_TYPES
from services.access import profile_settings as limits
from web.core import Console, Refused, form_text

POSITION = "position-"


def ordered_sources(form: Any) -> list[str]:
    """The ids of the sources given a position (`position-<id>`: 1 is searched first), in that order;
    a blank position leaves the source out. Equal positions keep the form's order."""
    placed: list[tuple[int, int, str]] = []
    for index, (key, value) in enumerate(form.multi_items()):
        if not key.startswith(POSITION) or not isinstance(value, str) or not value.strip():
            continue
        try:
            position = int(value)
        except ValueError:
            raise Refused(400, f"The position of a source must be a whole number (got {value[:20]!r}).") from None
        if position < 1:
            raise Refused(400, "Positions start at 1 (blank: not in the profile).")
        placed.append((position, index, key.removeprefix(POSITION)))
    return [source for _, _, source in sorted(placed)]


def profile_fields(request: Request) -> dict[str, Any]:
    """The edit form as ProfileService.update's fields (unchecked boxes send nothing: false)."""
    form = request.state.form
    chosen = [f for f in form.getlist("hit_field") if isinstance(f, str)]
    return {
        "description": form_text(request, "description"),
        "enabled": form_text(request, "enabled") == "on",
        "read_only": form_text(request, "read_only") == "on",
        "exclude_flagged": form_text(request, "exclude_flagged") == "on",
        "search_type": form_text(request, "search_type"),
        "match_count": form_text(request, "match_count"),
        "similarity_threshold": form_text(request, "similarity_threshold"),
        "keyword_weight": form_text(request, "keyword_weight"),
        "source_ids": ordered_sources(form),
        "snippet_chars": form_text(request, "snippet_chars"),
        "hit_fields": None if form_text(request, "all_fields") == "on" else chosen,
    }


def routes(console: Console) -> list[Route]:
    async def service() -> Any:
        profiles = getattr(await console.app(), "profiles", None)
        if profiles is None:
            raise Refused(501, "Profiles are not available in this build.")
        return profiles

    async def edit_profile(request: Request) -> Response:
        profile = await (await service()).get(request.path_params["name"])
        choices = await console.source_choices()
        positions = {str(s): i + 1 for i, s in enumerate(profile.source_ids)}
        # the profile's sources first, in their order; then the others by title
        choices.sort(key=lambda s: positions.get(str(s["id"]), len(positions) + 1))
        return console.render(
            request,
            "profile.html",
            profile=profile,
            sources=choices,
            positions=positions,
            search_types=SEARCH_TYPES,
            hit_fields=limits.HIT_FIELDS,
            hit_core=limits.HIT_CORE,
            default_fields=limits.HIT_DEFAULT_FIELDS,
            limits=limits,
            saved=request.query_params.get("saved") == "1",
        )

    async def update_profile(request: Request) -> Response:
        name = request.path_params["name"]
        await (await service()).update(name, **profile_fields(request))
        return RedirectResponse(f"/access/profiles/{name}?saved=1", 303)

    async def switch_profile(request: Request) -> Response:
        enabled = form_text(request, "enabled") == "true"
        await (await service()).update(request.path_params["name"], enabled=enabled)
        return RedirectResponse("/access", 303)

    return [
        console.route("/access/profiles/{name}", edit_profile),
        console.route("/access/profiles/{name}", update_profile, methods=["POST"], write=True),
        console.route("/access/profiles/{name}/enabled", switch_profile, methods=["POST"], write=True),
    ]
