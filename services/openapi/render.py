"""Markdown for one operation: its tag as the top heading, then summary, description, parameters,
request body and responses, each schema as a field list and each example kept.
"""

from __future__ import annotations

from typing import Any

from services.openapi.examples import media_examples, swagger2_examples
from services.openapi.operations import Operation, is_swagger2, media_types
from services.openapi.resolve import SpecRefs
from services.openapi.schema import SchemaRenderer, one_line

#: An operation shorter than this (with section headings) is written without them, so it is one chunk
#: (the chunker starts a chunk at every heading; "200 — ok" alone would be a chunk of its own).
FLAT_LIMIT = 1500
PARAMETER_HEADER = ["| Name | In | Required | Type | Description |", "| --- | --- | --- | --- | --- |"]


def cell(text: Any) -> str:
    """Text safe inside a markdown table cell."""
    return one_line(text).replace("|", "\\|")


class OperationRenderer:
    """Renders the operations of one spec."""

    def __init__(self, spec: dict[str, Any], refs: SpecRefs, untagged: str) -> None:
        self.spec = spec
        self.refs = refs
        self.schemas = SchemaRenderer(refs)
        self.swagger2 = is_swagger2(spec)
        self.untagged = untagged
        self.flat = False

    def render(self, operation: Operation) -> str:
        """The operation's markdown: sections as headings, or as bold labels when it is short."""
        self.flat = False
        text = self._render(operation)
        if len(text) < FLAT_LIMIT:
            self.flat = True
            text = self._render(operation)
        return text

    def _heading(self, level: int, text: str) -> str:
        return f"**{text}**" if self.flat else "#" * level + " " + text

    def _render(self, operation: Operation) -> str:
        node = operation.node
        lines = [f"# {(operation.tags or [self.untagged])[0]}", "", f"## {operation.title}", ""]
        lines += self._facts(operation)
        if node.get("description"):
            lines += [str(node["description"]).strip(), ""]
        lines += self._parameters(operation)
        lines += self._request_body(operation)
        lines += self._responses(operation)
        return "\n".join(lines).strip() + "\n"

    def _facts(self, operation: Operation) -> list[str]:
        node = operation.node
        facts = [f"`{operation.method.upper()} {operation.path}`"]
        if operation.operation_id:
            facts.append(f"operationId `{operation.operation_id}`")
        if operation.tags:
            facts.append("tags: " + ", ".join(operation.tags))
        if node.get("deprecated") is True:
            facts.append("**deprecated**")
        security = node.get("security", self.spec.get("security"))
        if isinstance(security, list) and security:
            facts.append("security: " + self._security(security))
        return [" · ".join(facts), ""]

    @staticmethod
    def _security(requirements: list[Any]) -> str:
        names = []
        for requirement in requirements:
            for name, scopes in (requirement or {}).items():
                names.append(f"`{name}`" + (f" ({', '.join(map(str, scopes))})" if scopes else ""))
        return " or ".join(names) or "none"

    def _parameters(self, operation: Operation) -> list[str]:
        if not operation.parameters:
            return []
        lines = [self._heading(3, "Parameters"), "", *PARAMETER_HEADER]
        notes: list[str] = []
        for parameter in operation.parameters:
            schema = parameter if self.swagger2 else parameter.get("schema", {})
            described = self.schemas.target(schema).node
            description = " ".join(
                part
                for part in (
                    one_line(parameter.get("description") or ""),
                    self._enum(described),
                    self._parameter_example(parameter, described),
                )
                if part
            )
            required = "yes" if parameter.get("required") else "no"
            kind = self.schemas.type_label(schema)
            row = [parameter.get("name", ""), parameter.get("in", ""), required, kind, description]
            lines.append("| " + " | ".join(cell(value) for value in row) + " |")
            notes += media_examples(parameter, None, self.refs) if "examples" in parameter else []
        return [*lines, "", *notes]

    @staticmethod
    def _enum(schema: dict[str, Any]) -> str:
        values = schema.get("enum")
        return "Enum: " + ", ".join(map(str, values[:30])) + "." if isinstance(values, list) else ""

    @staticmethod
    def _parameter_example(parameter: dict[str, Any], schema: dict[str, Any]) -> str:
        for holder in (parameter, schema):
            if "example" in holder:
                return f"Example: {one_line(holder['example'])}."
        return ""

    def _request_body(self, operation: Operation) -> list[str]:
        if self.swagger2:
            return self._swagger2_body(operation)
        body = self.refs.value(operation.node.get("requestBody"))
        if not isinstance(body, dict):
            return []
        lines = [self._heading(3, "Request body"), ""]
        if body.get("required"):
            lines += ["Required.", ""]
        if body.get("description"):
            lines += [str(body["description"]).strip(), ""]
        return lines + self._content(body.get("content"))

    def _swagger2_body(self, operation: Operation) -> list[str]:
        if not operation.body_parameters:
            return []
        consumes = ", ".join(media_types(self.spec, operation.node, "consumes"))
        lines = [self._heading(3, "Request body"), "", f"Content type: {consumes}", ""]
        body = next((p for p in operation.body_parameters if p.get("in") == "body"), None)
        if body is not None:
            if body.get("description"):
                lines += [str(body["description"]).strip(), ""]
            lines += self._schema_section(body.get("schema"), required=bool(body.get("required")))
            lines += media_examples({}, body.get("schema"), self.refs)
        form = [p for p in operation.body_parameters if p.get("in") == "formData"]
        if form:
            lines += ["Form fields:", ""]
            for field in form:
                required = ", required" if field.get("required") else ""
                note = f": {one_line(field['description'])}" if field.get("description") else ""
                lines.append(f"- `{field.get('name')}` ({self.schemas.type_label(field)}{required}){note}")
            lines.append("")
        return lines

    def _content(self, content: Any) -> list[str]:
        """Each media type of a 3.x body or response: its schema (once per distinct schema) and examples."""
        if not isinstance(content, dict):
            return []
        lines: list[str] = []
        shown: list[Any] = []
        for media_type, raw in content.items():
            media = raw if isinstance(raw, dict) else {}
            schema = media.get("schema")
            lines += [f"Content type `{media_type}`:", ""]
            if schema is not None and schema in shown:
                lines += ["Same schema as above.", ""]
            elif schema is not None:
                shown.append(schema)
                lines += self._schema_section(schema)
            lines += media_examples(media, schema, self.refs)
        return lines

    def _schema_section(self, schema: Any, required: bool = False) -> list[str]:
        if schema is None:
            return []
        label = self.schemas.type_label(schema)
        fields = self.schemas.render(schema)
        head = f"Schema: {label}" + (" (required)" if required else "")
        return [head + (":" if fields else "."), "", *fields, ""] if fields else [head, ""]

    def _responses(self, operation: Operation) -> list[str]:
        responses = operation.node.get("responses")
        if not isinstance(responses, dict) or not responses:
            return []
        lines = [self._heading(3, "Responses"), ""]
        for code, raw in responses.items():
            response = self.refs.value(raw)
            if not isinstance(response, dict):
                continue
            description = one_line(response.get("description") or "", 200)
            lines += [self._heading(4, f"{code}" + (f" — {description}" if description else "")), ""]
            lines += self._headers(response.get("headers"))
            if self.swagger2:
                lines += self._schema_section(response.get("schema")) + swagger2_examples(response)
            else:
                lines += self._content(response.get("content"))
        return lines

    def _headers(self, headers: Any) -> list[str]:
        if not isinstance(headers, dict) or not headers:
            return []
        lines = ["Headers:", ""]
        for name, raw in headers.items():
            header = self.refs.value(raw)
            if not isinstance(header, dict):
                continue
            schema = header if self.swagger2 else header.get("schema", {})
            note = f": {one_line(header['description'])}" if header.get("description") else ""
            lines.append(f"- `{name}` ({self.schemas.type_label(schema)}){note}")
        return [*lines, ""]
