"""Generates `tb_plugin/openapi.yaml`:

    python -m tb_plugin.views.openapi > tb_plugin/openapi.yaml

The data routes' paths, parameters (types, bounds, defaults) and payload schemas come from the
view specs (`registry.SPECS`); the routes that are not views (`/runs`, `/views`, ...), the shared
parameters and responses, and the API's description are written out here
(`openapi_text.py`). A test checks that the committed file equals this output.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from ..payloads import (
    CaptureAccepted,
    CaptureForm,
    CaptureProgress,
    CaptureTargets,
    DiffDefault,
    Error,
    Loading,
    RunListing,
    SpanStatusDetail,
    ViewSpecs,
)
from . import openapi_capture
from . import openapi_text as text
from .options import option_fields
from .registry import SPECS
from .spec import EXPORT, PAIR, SNAPSHOT, SPAN, ViewSpec
from .yaml_out import dump

REF = "#/components/{kind}/{name}"
#: Replies of the routes that are not views, referenced by name from `openapi_text.PATHS`.
CATALOGUE_SCHEMAS = (RunListing, SpanStatusDetail, ViewSpecs, Loading, Error, DiffDefault,
                     CaptureTargets, CaptureForm, CaptureAccepted, CaptureProgress)


def _ref(kind: str, name: str) -> dict[str, str]:
    return {"$ref": REF.format(kind=kind, name=name)}


def document() -> dict[str, Any]:
    missing = [spec.name for spec in SPECS.values() if spec.payload is None]
    if missing:
        raise ValueError(f"view specs without a payload type: {', '.join(missing)}")
    payloads = sorted({spec.payload for spec in SPECS.values()}, key=lambda t: t.__name__)
    schemas, components = msgspec.json.schema_components(
        [*payloads, *CATALOGUE_SCHEMAS], ref_template=REF.format(kind="schemas", name="{name}"))
    payload_schema = dict(zip(payloads, schemas))
    paths = {**text.PATHS, **openapi_capture.PATHS}
    for spec in SPECS.values():
        paths[spec.route] = {"get": _operation(spec, payload_schema[spec.payload])}
    return {
        "openapi": "3.1.0",
        "info": text.INFO,
        "servers": [{"url": "/data/plugin/torch_prof"}],
        "paths": paths,
        "components": {
            "parameters": text.PARAMETERS,
            "responses": text.RESPONSES,
            "schemas": components,
        },
    }


def _operation(spec: ViewSpec, payload: dict[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": spec.summary}
    if spec.description:
        operation["description"] = spec.description + "\n"
    operation["parameters"] = _addressing(spec) + _options(spec) + (
        [_ref("parameters", "format")] if spec.rows is not None else [])
    ok: dict[str, Any] = {"application/json": {"schema": payload}}
    if spec.rows is not None:
        ok["text/csv"] = {}
    responses = {"200": {"description": "The view's data (JSON)" + (
        ", or CSV with `format=csv`." if spec.rows is not None else "."), "content": ok}}
    for code in ("202", "400", "404", "422"):
        kind = "Loading" if code == "202" else "Error"
        if code in spec.errors:
            responses[code] = {"description": spec.errors[code], "content": {
                "application/json": {"schema": _ref("schemas", "Error")}}}
        else:
            responses[code] = _ref("responses", kind)
    operation["responses"] = responses
    return operation


def _addressing(spec: ViewSpec) -> list[dict[str, Any]]:
    if spec.kind == SPAN:
        return [_ref("parameters", "run"), _ref("parameters", "span")]
    if spec.kind == EXPORT:
        return [_ref("parameters", "run"), text.optional("worker", "With `span`; omit both for "
                                                          "a run-level export."),
                text.optional("span", "")]
    if spec.kind == SNAPSHOT:
        return [_ref("parameters", "run"), text.optional("worker", "With `span`: show the "
                                                          "snapshot on that span's clock."),
                text.optional("span", "")]
    sides = [_ref("parameters", name) for name in ("run", "worker", "span")]
    if spec.kind == PAIR:
        sides += [text.required(f"exp_{name}", f"The experiment side's {name}.")
                  for name in ("run", "worker", "span")]
    return sides


def _options(spec: ViewSpec) -> list[dict[str, Any]]:
    (_,), components = msgspec.json.schema_components([spec.options])
    properties = components[spec.options.__name__].get("properties", {})
    parameters = []
    for field in option_fields(spec.options):
        schema = dict(properties[field.param])
        if "anyOf" in schema:  # Optional[X]: absent, never null, in a query string
            default = schema.pop("default", None)
            schema = {**next(s for s in schema.pop("anyOf") if s != {"type": "null"}),
                      **schema}
            if default is not None:
                schema["default"] = default
        if "enum" in schema:
            schema = {"type": "string", **schema}
        description = schema.pop("description", "")
        parameter = {"name": field.param, "in": "query", "required": field.required}
        if description:
            parameter["description"] = description
        parameters.append({**parameter, "schema": schema})
    return parameters


def main() -> int:
    sys.stdout.write(dump(document()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
