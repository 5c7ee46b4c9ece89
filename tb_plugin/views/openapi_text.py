"""The hand-written part of `tb_plugin/openapi.yaml`: the API's description, the routes that
are not view data routes, and the shared parameters, responses and schemas (`openapi.py` adds
one path per view spec and the payload schemas)."""

from __future__ import annotations

from typing import Any


def required(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": True,
        "description": description,
        "schema": {"type": "string"},
    }


def optional(name: str, description: str) -> dict[str, Any]:
    parameter: dict[str, Any] = {"name": name, "in": "query", "required": False}
    if description:
        parameter["description"] = description
    return {**parameter, "schema": {"type": "string"}}


INFO: dict[str, Any] = {
    "title": "torch-prof TensorBoard plugin API",
    "version": "0.1.0",
    "description": """\
HTTP API of the `torch_prof` TensorBoard plugin (tab "PyTorch Profiler").

All routes are GET (HEAD also works) and relative to the plugin's base URL,
`<path_prefix>/data/plugin/torch_prof/`; the frontend resolves them against its own module URL.
Every response carries `X-Content-Type-Options: nosniff`; HTML carries a strict
Content-Security-Policy. JSON is UTF-8; NaN and infinities are sent as `null`.

Errors are `{"error": {"code": <status>, "message": "..."}}`:
400 missing, repeated or invalid parameter (also a bad timeline window or width, and
`format=csv` on a route without a table); 404 unknown run, worker, span, view of that worker,
operator, event id, memory device, diff path, static file or route; 405 not GET; 422 the
worker span's file could not be parsed (`error.messages` says why); 500 an internal bug
(short message, details in the server log).
A worker span that is still queued or being parsed answers **202** with
`{"loading": true, "progress": 0..1, "state": "queued"|"loading"}` and `Retry-After: 1`:
poll again later. Routes over several files (`/distributed`, `/diff`) answer 202 while any of
them is.

Views (`/views`, in this order; `/viewspecs` lists them all) and when a run offers them:
Overview, Operator, Trace (every parsed file); Kernel (a file ran GPU kernels); Memory (a file
has `[memory]` events, or a memory-timeline export `*.raw.json.gz` pairs with it; also a run
holding only exports); Distributed (some worker has communication ops; run-level:
`/workers?view=Distributed` lists every worker); Module (a file has `nn.Module` or Lightning
`[pl][module]` events); Diff (run-level: the run has two parsed traces, or another run of the
logdir has one). The data routes of each view are generated from its specs
(`tb_plugin/views/registry.py`).

Run, worker and span names are matched exactly against the discovered names; they are
never used as paths.
""",
}

PATHS: dict[str, Any] = {
    "/index.js": {
        "get": {
            "summary": "The frontend ES module (exports `render()`), from `tb_plugin/static/`.",
            "responses": {
                "200": {
                    "description": "JavaScript module.",
                    "content": {"application/javascript": {}},
                },
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/assets/{file}": {
        "get": {
            "summary": "A static asset of the frontend bundle, by exact name "
            "under `static/assets/`.",
            "parameters": [
                {"name": "file", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "responses": {
                "200": {"description": "The file, with a content type from its extension."},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/runs": {
        "get": {
            "summary": "All runs, sorted by name, with per-worker-span load state.",
            "description": "Polling this route also triggers a rescan of the logdir when "
            "the last one is older than\n"
            "a few seconds (new runs, new files, and files that changed are "
            "picked up).\n",
            "responses": {
                "200": {
                    "description": "The run listing.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/RunListing"}}
                    },
                },
                "400": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/views": {
        "get": {
            "summary": "The views the run offers, in display order.",
            "parameters": [{"$ref": "#/components/parameters/run"}],
            "responses": {
                "200": {
                    "description": 'View names, e.g. `["Overview", "Operator", "Kernel"]`.',
                    "content": {
                        "application/json": {
                            "schema": {"type": "array", "items": {"type": "string"}}
                        }
                    },
                },
                "202": {"$ref": "#/components/responses/Loading"},
                "400": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/viewspecs": {
        "get": {
            "summary": "Every view the plugin has, in display order, whatever the runs offer.",
            "description": "For the frontend's view registry: a view's name (as in `/views` "
            "and `/workers?view=`),\nits display order, and whether it covers the whole run "
            "(`run_level`).\n",
            "responses": {
                "200": {
                    "description": "The views.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ViewSpecs"}}
                    },
                },
                "400": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/workers": {
        "get": {
            "summary": "Sorted names of the run's workers that offer the view (or are "
            "still loading).",
            "parameters": [
                {"$ref": "#/components/parameters/run"},
                {
                    "name": "view",
                    "in": "query",
                    "required": True,
                    "description": "A view name as returned by `/views` (e.g. `Kernel`).",
                    "schema": {"type": "string"},
                },
            ],
            "responses": {
                "200": {
                    "description": "Worker names.",
                    "content": {
                        "application/json": {
                            "schema": {"type": "array", "items": {"type": "string"}}
                        }
                    },
                },
                "400": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/spans": {
        "get": {
            "summary": 'The worker\'s span ids in numeric order (`"1"`, `"2"`, ..., '
            '`"10"`; or `"default"`).',
            "parameters": [
                {"$ref": "#/components/parameters/run"},
                {"$ref": "#/components/parameters/worker"},
            ],
            "responses": {
                "200": {
                    "description": "Span ids.",
                    "content": {
                        "application/json": {
                            "schema": {"type": "array", "items": {"type": "string"}}
                        }
                    },
                },
                "400": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/status": {
        "get": {
            "summary": "Load status of one worker span (200 whatever the state).",
            "parameters": [
                {"$ref": "#/components/parameters/run"},
                {"$ref": "#/components/parameters/worker"},
                {"$ref": "#/components/parameters/span"},
            ],
            "responses": {
                "200": {
                    "description": "The span's status.",
                    "content": {
                        "application/json": {
                            "schema": {"$ref": "#/components/schemas/SpanStatusDetail"}
                        }
                    },
                },
                "400": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/diff/default": {
        "get": {
            "summary": "The experiment the Diff view proposes for this baseline worker span.",
            "description": "The same worker's other span, else another worker of the same "
            "run, else the run whose\noperator names overlap most (`reason`, `message`). From "
            "the catalogue only (no trace is\nread); null names when nothing else is usable.\n",
            "parameters": [
                {"$ref": "#/components/parameters/run"},
                {"$ref": "#/components/parameters/worker"},
                {"$ref": "#/components/parameters/span"},
            ],
            "responses": {
                "200": {
                    "description": "The proposed experiment.",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/DiffDefault"}}
                    },
                },
                "400": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
    "/trace/download": {
        "get": {
            "summary": "The worker span's trace file, byte for byte as stored (streamed).",
            "description": "`application/gzip` for `*.gz` files, else "
            "`application/json`, with\n"
            '`Content-Disposition: attachment; filename="<file '
            'name>"` and `nosniff`. Served whatever\n'
            "the file's parse state (a broken file can be "
            "downloaded to be inspected).\n"
            "403 when the file is unreadable, not a regular file, or its real path is "
            "outside the logdir\n(`TORCH_PROF_SERVE_OUTSIDE_LOGDIR=1` allows that).\n",
            "parameters": [
                {"$ref": "#/components/parameters/run"},
                {"$ref": "#/components/parameters/worker"},
                {"$ref": "#/components/parameters/span"},
            ],
            "responses": {
                "200": {
                    "description": "The file's bytes.",
                    "content": {"application/gzip": {}, "application/json": {}},
                },
                "400": {"$ref": "#/components/responses/Error"},
                "403": {"$ref": "#/components/responses/Error"},
                "404": {"$ref": "#/components/responses/Error"},
            },
        }
    },
}

PARAMETERS: dict[str, Any] = {
    "run": {
        "name": "run",
        "in": "query",
        "required": True,
        "description": "A run name from `/runs` (the folder path relative to the logdir).",
        "schema": {"type": "string"},
    },
    "worker": {"name": "worker", "in": "query", "required": True, "schema": {"type": "string"}},
    "span": {
        "name": "span",
        "in": "query",
        "required": True,
        "description": "A span id from `/spans`.",
        "schema": {"type": "string"},
    },
    "format": {
        "name": "format",
        "in": "query",
        "required": False,
        "description": "`csv` answers `text/csv` (UTF-8) with `Content-Disposition: "
        "attachment;\n"
        'filename="<run>-<worker>-<span>-<route>.csv"`. Nested fields become '
        "dotted columns;\n"
        "cells starting with `= + - @` are prefixed with `'` (no spreadsheet "
        "formulas).\n",
        "schema": {"type": "string", "enum": ["json", "csv"], "default": "json"},
    },
}

RESPONSES: dict[str, Any] = {
    "Loading": {
        "description": "The worker span (or, for `/views`, every file of the run) is still "
        "loading.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Loading"}}},
    },
    "Error": {
        "description": "An error (see the description at the top).",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    },
}
