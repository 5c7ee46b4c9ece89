"""The capture routes' part of `tb_plugin/openapi.yaml` (`openapi.py` merges it into the
paths): capture on demand, `server/capture_routes.py`."""

from __future__ import annotations

from typing import Any


def _json(schema: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{schema}"}}}}


ERROR = {"$ref": "#/components/responses/Error"}

PATHS: dict[str, Any] = {
    "/capture/targets": {
        "get": {
            "summary": "Whether capture on demand is enabled, and the runs where a job listens.",
            "description": "A run listens when a process of its job runs "
            "`Recorder(..., on_demand=True)` or\n`tb_plugin.recorder.listen` (a "
            "`.torch-prof-listen.<worker>` file in the run folder).\n",
            "responses": {"200": _json("CaptureTargets", "Capture state and targets."),
                          "400": ERROR},
        }
    },
    "/capture": {
        "post": {
            "summary": "Ask the job listening in a run to record its next steps.",
            "description": "Writes the request file `.torch-prof-capture.request` into the "
            "run folder, as\n`torch-prof capture` does. 403 unless TensorBoard was started "
            "with\n`TORCH_PROF_ALLOW_CAPTURE=1`; 400 for a body that is not a JSON "
            "`CaptureForm` (with\n`Content-Type: application/json`, at most 4096 bytes); 404 "
            "when no job listens in the run.\n",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/CaptureForm"}}}},
            "responses": {"200": _json("CaptureAccepted", "The request was written."),
                          "400": ERROR, "403": ERROR, "404": ERROR},
        }
    },
    "/capture/status": {
        "get": {
            "summary": "Every worker's answer to a request made through `POST /capture`.",
            "parameters": [{"name": "id", "in": "query", "required": True,
                            "description": "The id `POST /capture` answered.",
                            "schema": {"type": "string"}}],
            "responses": {"200": _json("CaptureProgress", "The workers' statuses."),
                          "400": ERROR, "404": ERROR},
        }
    },
}
