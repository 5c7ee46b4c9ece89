"""Every JSON reply the server tests decode is checked against the committed
`tb_plugin/openapi.yaml`: the route and status must be documented, and the body must match the
documented schema (JSON Schema 2020-12, as OpenAPI 3.1 uses). `harness.Reply.json` calls it."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import jsonschema
import yaml

OPENAPI = Path(__file__).resolve().parents[2] / "tb_plugin" / "openapi.yaml"
PREFIX = "/data/plugin/torch_prof"
#: Statuses every route may answer, described once at the top of the document (`Error`).
GENERIC = {"404", "405", "500"}


@functools.lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    return yaml.safe_load(OPENAPI.read_text())


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    """A response object, following `$ref`s within the document."""
    while "$ref" in node:
        target: Any = _document()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _schema_of(route: str, status: str) -> dict[str, Any]:
    document = _document()
    path = document["paths"].get(route, {})
    operation = path.get("get") or path.get("post")  # each route has one method
    responses = operation["responses"] if operation else {}
    if status not in responses:
        assert status in GENERIC, f"undocumented answer {status} of {route}"
        return {"$ref": "#/components/schemas/Error"}
    response = _resolve(responses[status])
    content = response.get("content", {})
    assert "application/json" in content, f"{route} {status}: JSON is not documented"
    return content["application/json"].get("schema", {})


def check_reply(url: str, status: int, value: Any) -> Any:
    """`value` (a decoded JSON reply from `url`) if it matches the documented schema."""
    path = urlparse(url).path
    if PREFIX not in path:
        return value
    route = path.split(PREFIX, 1)[1]
    schema = _schema_of(route, str(status))
    # `#/components/...` references resolve against the schema's root: give it the document's.
    jsonschema.Draft202012Validator({**schema, "components": _document()["components"]}
                                    ).validate(value)
    return value
