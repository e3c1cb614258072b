"""The overview document of a spec: its info, servers, security schemes, and every tag with the
operations filed under it (a table of contents for the operation documents)."""

from __future__ import annotations

from typing import Any

from services.openapi.operations import Operation, is_swagger2
from services.openapi.resolve import SpecRefs
from services.openapi.schema import one_line


def mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """parent[key] when it is an object, else {} (a spec may hold anything where an object belongs)."""
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def api_title(spec: dict[str, Any]) -> str:
    info = mapping(spec, "info")
    return one_line(info.get("title") or "API", 200)


def api_version(spec: dict[str, Any]) -> str | None:
    info = mapping(spec, "info")
    return str(info["version"]) if info.get("version") is not None else None


def overview_title(spec: dict[str, Any]) -> str:
    version = api_version(spec)
    return f"{api_title(spec)} {version} — API overview" if version else f"{api_title(spec)} — API overview"


def render_overview(spec: dict[str, Any], operations: list[Operation], refs: SpecRefs) -> str:
    info = mapping(spec, "info")
    lines = [f"# {overview_title(spec)}", ""]
    kind = "Swagger" if is_swagger2(spec) else "OpenAPI"
    lines += [f"{kind} {spec.get('swagger') or spec.get('openapi')} specification, {len(operations)} operations.", ""]
    if info.get("description"):
        lines += [str(info["description"]).strip(), ""]
    lines += _about(info, spec)
    lines += _servers(spec)
    lines += _security_schemes(spec, refs)
    lines += _tags(spec, operations)
    return "\n".join(lines).strip() + "\n"


def _about(info: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    facts = []
    if info.get("termsOfService"):
        facts.append(f"- Terms of service: {info['termsOfService']}")
    contact = mapping(info, "contact")
    if contact:
        facts.append("- Contact: " + ", ".join(str(contact[k]) for k in ("name", "email", "url") if contact.get(k)))
    licence = mapping(info, "license")
    if licence:
        facts.append("- License: " + " ".join(str(licence[k]) for k in ("name", "identifier", "url") if licence.get(k)))
    docs = mapping(spec, "externalDocs")
    if docs.get("url"):
        facts.append(
            f"- Documentation: {docs['url']}"
            + (f" ({one_line(docs['description'])})" if docs.get("description") else "")
        )
    return ["## About", "", *facts, ""] if facts else []


def _servers(spec: dict[str, Any]) -> list[str]:
    if is_swagger2(spec):
        if not spec.get("host"):
            return []
        schemes = spec.get("schemes") or ["https"]
        urls = [f"{scheme}://{spec['host']}{spec.get('basePath') or ''}" for scheme in schemes]
        return ["## Servers", "", *(f"- {url}" for url in urls), ""]
    servers = [s for s in spec.get("servers") or [] if isinstance(s, dict) and s.get("url")]
    if not servers:
        return []
    lines = ["## Servers", ""]
    for server in servers:
        note = f": {one_line(server['description'])}" if server.get("description") else ""
        lines.append(f"- {server['url']}{note}")
        for name, variable in (server.get("variables") or {}).items():
            if isinstance(variable, dict):
                options = f" (one of {', '.join(map(str, variable['enum']))})" if variable.get("enum") else ""
                lines.append(f"  - `{{{name}}}` default `{variable.get('default')}`{options}")
    return [*lines, ""]


def _security_schemes(spec: dict[str, Any], refs: SpecRefs) -> list[str]:
    components = mapping(spec, "components")
    schemes = spec.get("securityDefinitions") or components.get("securitySchemes") or {}
    if not isinstance(schemes, dict) or not schemes:
        return []
    lines = ["## Authentication", ""]
    for name, raw in schemes.items():
        scheme = refs.value(raw)
        if not isinstance(scheme, dict):
            continue
        where = f" in {scheme.get('in')} `{scheme.get('name')}`" if scheme.get("in") else ""
        flavour = f" ({scheme['scheme']})" if scheme.get("scheme") else ""
        note = f": {one_line(scheme['description'])}" if scheme.get("description") else ""
        lines.append(f"- `{name}`: {scheme.get('type')}{flavour}{where}{note}")
    return [*lines, ""]


def _tags(spec: dict[str, Any], operations: list[Operation]) -> list[str]:
    """Each tag (declared order first, then as used) with its description and operations."""
    described = {str(t.get("name")): t for t in spec.get("tags") or [] if isinstance(t, dict) and t.get("name")}
    by_tag: dict[str, list[Operation]] = {name: [] for name in described}
    for operation in operations:
        for tag in operation.tags or ["(untagged)"]:
            by_tag.setdefault(tag, []).append(operation)
    lines = ["## Operations by tag", ""]
    for tag, tagged in by_tag.items():
        lines += [f"### {tag}", ""]
        if described.get(tag, {}).get("description"):
            lines += [one_line(described[tag]["description"], 1000), ""]
        lines += [f"- {operation.title}" for operation in tagged] + [""]
    return lines
