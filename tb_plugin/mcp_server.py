"""`torch-prof mcp LOGDIR`: the logdir's views as MCP tools over stdio (the `mcp` SDK, the
optional extra `torch-prof[mcp]`).

The tools are generated from the view registry, so they cannot drift from it: one tool per
data view (`report --view` name; its description the spec's summary and description, its input
schema the run/worker/span selectors and the spec's options with their bounds, defaults and
descriptions), `findings` among them, plus `list_runs` (the logdir's runs, workers and spans;
nothing is parsed) and `sql` (one DuckDB statement over the parsed tables, `torch-prof sql`).
A view tool answers the payload the HTTP API answers for the same view and options (the same
builders through `reports.build_report`, the same JSON encoding), as text holding the JSON. What
the caller can fix (an unknown run, a bad option) and a trace that cannot be read are tool
errors (`isError`) with the message in words; the server goes on.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .cache import TraceCache
from .discovery import discover_runs
from .output.encoding import encode_json
from .reports import LoadError, Target, UsageError, build_report, find_run, options_from
from .sql import SqlError, SqlUnavailable, query_runs
from .views.errors import NotInTrace, OptionError, Unreadable
from .views.options import OptionField, option_fields
from .views.registry import SPECS
from .views.spec import PAIR, SPAN, ViewSpec

#: Rows of a `sql` answer at most (the rest is counted, not sent: an agent's context is small).
SQL_MAX_ROWS = 1000
_SELECTORS = {
    "run": {"type": "string", "description": "The run (a folder name, as list_runs names it)."},
    "worker": {"type": "string", "description": "The worker; default: the run's first."},
    "span": {"type": "string", "description": "The span; default: the worker's first."},
}
_EXP = {f"exp_{name}": {**schema, "description": "Diff: the " + name + " to compare with" + (
    "." if name == "run" else f"; default: its first {name}.")}
    for name, schema in _SELECTORS.items()}


def option_schema(field: OptionField) -> dict[str, Any]:
    """The JSON schema of one view option (as `views/options.py` validates it)."""
    schema: dict[str, Any] = {"description": field.description or field.param}
    if field.kind == "choice":
        schema.update(type="string", enum=list(field.choices))
    elif field.kind in ("integer", "number"):
        schema["type"] = field.kind
        if field.minimum is not None:
            schema["minimum"] = field.minimum
        if field.maximum is not None:
            schema["maximum"] = field.maximum
    else:
        schema["type"] = "string"
        if field.pattern is not None:
            schema["pattern"] = field.pattern
        if field.max_length is not None:
            schema["maxLength"] = field.max_length
    if field.default is not None:
        schema["default"] = field.default
    return schema


def view_tool(spec: ViewSpec) -> types.Tool:
    """The tool of one view spec."""
    properties: dict[str, Any] = {"run": _SELECTORS["run"]}
    if spec.kind != SPAN:  # a span view covers every worker of the span
        properties["worker"] = _SELECTORS["worker"]
    properties["span"] = _SELECTORS["span"]
    required = ["run"]
    if spec.kind == PAIR:
        properties.update(_EXP)
        required.append("exp_run")
    for field in option_fields(spec.options):
        properties[field.attr] = option_schema(field)
        if field.required:
            required.append(field.attr)
    text = " ".join(t for t in (spec.summary, spec.description) if t)
    return types.Tool(name=spec.name, description=f"{spec.view} view: {text}", input_schema={
        "type": "object", "properties": properties, "required": required,
        "additionalProperties": False})


def tools() -> list[types.Tool]:
    """Every tool: one per registry view, then list_runs and sql."""
    return [view_tool(spec) for spec in SPECS.values()] + [
        types.Tool(name="list_runs", description="The runs of the logdir with their workers "
                   "and spans (and memory exports and allocator snapshots); nothing is parsed.",
                   input_schema={"type": "object", "properties": {},
                                 "additionalProperties": False}),
        types.Tool(name="sql", description="One SQL statement (DuckDB) over the parsed tables "
                   "(events, traces, device_args, op_args, python_args, memory, flows; each "
                   f"has run, worker and span columns); at most {SQL_MAX_ROWS} rows are "
                   "returned, as JSON records.", input_schema={
                       "type": "object", "required": ["statement"],
                       "additionalProperties": False, "properties": {
                           "statement": {"type": "string", "description": "e.g. SELECT name, "
                                         "sum(dur) FROM events WHERE run = 'r' GROUP BY 1"},
                           "runs": {"type": "array", "items": {"type": "string"},
                                    "description": "Only these runs (default: every run; "
                                    "each is parsed into the cache first)."}}}),
    ]


class Tools:
    """The answers of the tools over one logdir and cache (blocking; run in a thread)."""

    def __init__(self, logdir: str, cache: TraceCache) -> None:
        self.logdir, self.cache = logdir, cache
        self.outside = cache.config.serve_outside_logdir  # the settings the CLI read once

    def call(self, name: str, arguments: dict[str, Any]) -> bytes:
        """The JSON answer; UsageError/LoadError (and the views' errors) for a tool error."""
        if name == "list_runs":
            return encode_json(self.list_runs())
        if name == "sql":
            return encode_json(self.sql(arguments))
        spec = SPECS.get(name)
        if spec is None:
            raise UsageError(f"unknown tool {name!r}")
        values = dict(arguments)
        target = Target(*(_text_or_none(values.pop(k, None)) or "" if k == "run" else
                          _text_or_none(values.pop(k, None)) for k in ("run", "worker", "span")))
        exp = None
        if spec.kind == PAIR:
            exp = Target(*(_text_or_none(values.pop(f"exp_{k}", None)) or "" if k == "run" else
                           _text_or_none(values.pop(f"exp_{k}", None))
                           for k in ("run", "worker", "span")))
        if not target.run:
            raise UsageError("run is required (list_runs names them)")
        options = options_from(spec, values)
        return encode_json(build_report(self.logdir, spec, options, self.cache, target, exp))

    def list_runs(self) -> dict[str, Any]:
        return {"logdir": self.logdir, "runs": [{
            "name": run.name,
            "workers": {worker: [span.span for span in spans]
                        for worker, spans in run.workers.items()},
            "memory_timelines": [ref.name for ref in run.memory_timelines],
            "memory_snapshots": [ref.name for ref in run.memory_snapshots],
        } for run in discover_runs(self.logdir, serve_outside_logdir=self.outside)]}

    def sql(self, arguments: dict[str, Any]) -> dict[str, Any]:
        statement = arguments.get("statement")
        if not isinstance(statement, str) or not statement.strip():
            raise UsageError("statement is required")
        names = arguments.get("runs")
        runs = ([find_run(self.logdir, str(n), self.outside) for n in names] if names
                else discover_runs(self.logdir, serve_outside_logdir=self.outside))
        try:
            frame = query_runs(runs, statement, self.cache)
        except SqlError as exc:
            raise UsageError(str(exc)) from None
        except SqlUnavailable as exc:
            raise LoadError(str(exc)) from None
        rows = frame.head(SQL_MAX_ROWS)
        return {"columns": [str(c) for c in frame.columns], "rows": _records(rows),
                "total_rows": int(len(frame)), "truncated": len(frame) > SQL_MAX_ROWS}


def _records(frame: Any) -> list[dict[str, Any]]:
    """The frame's rows as JSON-able records (NaN as null, numpy scalars as Python's)."""
    return [{str(k): (None if v != v else v.item() if hasattr(v, "item") else v)
             for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _text_or_none(value: Any) -> Any:
    return None if value is None else str(value)


def server(logdir: str, cache: TraceCache) -> Server:
    answers = Tools(logdir, cache)
    listed = types.ListToolsResult(tools=tools())

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return listed

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        try:
            body = await anyio.to_thread.run_sync(answers.call, params.name, arguments)
        except (UsageError, OptionError, NotInTrace, LoadError, Unreadable, OSError) as exc:
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"error: {exc}")], is_error=True)
        return types.CallToolResult(content=[types.TextContent(
            type="text", text=body.decode("utf-8"))])

    return Server("torch-prof", version=importlib.metadata.version("torch-prof"),
                  instructions="PyTorch profiler traces of one logdir: call list_runs, then "
                  "findings for a run (what matters, with pointers to the other tools and "
                  "their options).", on_list_tools=list_tools, on_call_tool=call_tool)


def serve(logdir: str, cache: TraceCache) -> int:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    app = server(logdir, cache)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await app.run(read, write, app.create_initialization_options())

    anyio.run(main)
    return 0
