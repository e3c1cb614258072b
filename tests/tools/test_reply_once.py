"""A tool reply is built once (tools/common.tool_result): its structured content is JSON's own types,
and its text is exactly that, dumped; never encoded and parsed back."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from enum import Enum
from uuid import uuid4

from tools.common import failure, tool_result


class Kind(str, Enum):  # noqa: UP042 (json writes its value; str() would not)
    A = "a"


def test_structured_content_is_the_text_parsed() -> None:
    doc = uuid4()
    body = {
        "success": True,
        "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "id": doc,
        "scores": (0.5, math.nan, math.inf, -math.inf, 1e-7),
        "nested": {"list": [doc, {"deep": (1, 2)}], 3: "int key", None: "none key", True: "bool key"},
        "kind": Kind.A,
        "text": "naïve — ünïcode",
        "objects": {frozenset({1})},
    }
    result = tool_result(body)
    text = result.content[0].text
    assert result.structured_content == json.loads(text)
    assert result.structured_content["scores"] == [0.5, "nan", "inf", "-inf", 1e-7]
    assert result.structured_content["at"] == "2026-01-02T03:04:05+00:00"
    assert result.structured_content["nested"]["list"][0] == str(doc)
    assert set(result.structured_content["nested"]) == {"list", "3", "null", "true"}
    assert result.structured_content["kind"] == "a" and "naïve" in text and ", " not in text


def test_a_failure_is_built_once_too() -> None:
    result = failure("NOT_FOUND", "Source 'x' not found.", "List sources.")
    assert result.is_error and result.structured_content == json.loads(result.content[0].text)
    assert result.structured_content["error_code"] == "NOT_FOUND"
