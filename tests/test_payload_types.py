"""Every JSON body the plugin serves conforms strictly to its type in `tb_plugin.payloads`.

The payloads are built in-process the way the server builds them (`analysis.distributed.view` and
the
builders its routes call, with the option variants the UI uses), encoded with the server's
encoder, then decoded with `msgspec.json.decode(..., type=PAYLOADS[route], strict=True)`. The
decoded value must also equal the plain JSON: a TypedDict drops keys it does not declare, so a
payload key missing from its type shows up as a difference. Runs: samples/ always, and every
run of ../shared/traces when that folder is present.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tb_plugin.analysis.distributed.view import build_distributed_view
from tb_plugin.analysis.features import features, summarize
from tb_plugin.analysis.kernels import build_kernel_pies
from tb_plugin.analysis.modules import build_modules
from tb_plugin.analysis.operators import build_call_stacks, build_operator_pies
from tb_plugin.cache import TraceCache
from tb_plugin.discovery import RunInfo, discover_runs, matching_timeline
from tb_plugin.ingest import TraceTable
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import encode_json
from tb_plugin.payloads import CATALOGUE, REPLIES
from tb_plugin.server.errors import BadRequest, StillLoading, Unprocessable
from tb_plugin.server.parse_child import store_summary
from tb_plugin.server.store import RunStore
from tb_plugin.settings import Settings
from tb_plugin.views.registry import SPECS, build_view
from tests.support import SAMPLES, SHARED_TRACES, needs_shared

#: Route -> the type of its 200 JSON body: the view specs' payload types plus the catalogue's.
PAYLOADS = {**{spec.route: spec.payload for spec in SPECS.values()}, **CATALOGUE}
ROUTES_WITH_PAYLOADS = {"/overview", "/operators", "/operators/pies", "/operators/stack",
                        "/kernels", "/kernels/pies", "/timeline", "/timeline/event",
                        "/timeline/search", "/memory", "/modules", "/whatif"}


def _runs(root: Path) -> list[RunInfo]:
    return discover_runs(str(root)) if root.is_dir() else []


# -- conformance --------------------------------------------------------------------------------


def undeclared(typed: Any, plain: Any, path: str = "$") -> list[str]:
    """Paths of keys in `plain` that the typed decoding dropped (keys the type does not know)."""
    if isinstance(plain, dict):
        missing = [f"{path}.{key}" for key in plain if key not in typed]
        return missing + [p for key in typed for p in undeclared(typed[key], plain[key],
                                                                 f"{path}.{key}")]
    if isinstance(plain, list):
        return [p for i, (a, b) in enumerate(zip(typed, plain))
                for p in undeclared(a, b, f"{path}[{i}]")]
    return []


def check(route: str, payload: Any) -> None:
    body = encode_json(payload)
    typed = msgspec.json.decode(body, type=PAYLOADS[route], strict=True)
    plain = json.loads(body)
    assert undeclared(typed, plain) == [], route
    assert typed == plain, route


# -- payloads of one trace, of one run ------------------------------------------------------------


def trace_payloads(table: TraceTable, export: Any) -> Iterator[tuple[str, Any]]:
    """Every per-span route's payload, with the option variants the frontend sends."""
    yield "/overview", build_view(table, "overview")
    for group_by in ("operator", "operator_input_shape"):
        operators = build_view(table, "operators", group_by=group_by)
        yield "/operators", operators
        yield "/operators/pies", build_operator_pies(table, 10, group_by)
        yield "/operators/pies", build_operator_pies(table, None, group_by)
        for row in [r for r in operators["rows"] if r["has_call_stack"]][:2]:
            yield "/operators/stack", build_call_stacks(table, row["name"],
                                                        row.get("input_shape"), group_by)
    for group_by in ("kernel", "kernel_op_launch"):
        yield "/kernels", build_view(table, "kernels", group_by=group_by)
    yield "/kernels/pies", build_kernel_pies(table, 10)
    yield from _timeline_payloads(table)
    yield from _memory_payloads(table)
    if export is not None:
        yield "/memory/timeline", build_view(table, "memory_timeline", export)
    if build_modules(table)["available"]:  # else the route answers 404 (NotInTrace)
        yield "/modules", build_view(table, "modules")
    if features(table)["serving_steps"]:  # else the route answers 404 (NotInTrace)
        yield "/inference", build_view(table, "inference")
    yield "/whatif", build_view(table, "whatif", edit="launch=0; sync=0; op~^aten::=0.5")


def _timeline_payloads(table: TraceTable) -> Iterator[tuple[str, Any]]:
    whole = build_view(table, "timeline", width=1200)
    yield "/timeline", whole
    start, end = whole["trace_start_us"], whole["trace_end_us"]
    if end > start:
        zoom = build_view(table, "timeline", start_us=start + (end - start) * 0.4,
                                 end_us=start + (end - start) * 0.41, width=800)
        yield "/timeline", zoom
    ids = {0, len(table.events) - 1}
    for query in ("a", "ProfilerStep", "nccl", "zzz-none"):
        found = build_view(table, "timeline_search", query=query, limit=50)
        yield "/timeline/search", found
        ids.update(m["id"] for m in found["matches"][:5])
    for event_id in sorted(ids):
        yield "/timeline/event", build_view(table, "timeline_event", event_id=event_id)


def _memory_payloads(table: TraceTable) -> Iterator[tuple[str, Any]]:
    whole = build_view(table, "memory")
    yield "/memory", whole
    for device in whole["devices"]:
        yield "/memory", build_view(table, "memory", device=device)
    origin = whole["time_origin_us"]
    if origin is not None:
        yield "/memory", build_view(table, "memory", start_us=origin,
                                           end_us=origin + 1000.0)


def run_payloads(run: RunInfo) -> Iterator[tuple[str, Any]]:
    """Per-span payloads of every file of the run, then its distributed and diff payloads."""
    tables: dict[tuple[str, str], TraceTable] = {}
    for worker, spans in sorted(run.workers.items()):
        for span in spans:
            table = load_trace(span.ref, use_cache=False)
            tables[(worker, span.span)] = table
            yield from trace_payloads(table, matching_timeline(span.ref.name,
                                                               run.memory_timelines))
    if not run.workers and run.memory_timelines:  # a run holding only exports
        yield "/memory/timeline", build_view(None, "memory_timeline",
                                                    run.memory_timelines[0])
    for span in sorted({s for _, s in tables}):
        mine = {w: t for (w, s), t in tables.items() if s == span}
        yield "/distributed", build_distributed_view(mine, {"absent": "no such span"})
    pair = list(tables.values())[:2]
    if pair:
        root = build_view(pair[0], "diff", pair[-1])
        yield "/diff", root
        for child in [c for c in root["children"] if c["expandable"]][:2]:
            yield "/diff", build_view(pair[0], "diff", pair[-1], path=child["path"])


def _check_run(run: RunInfo) -> set[str]:
    seen = set()
    for route, payload in run_payloads(run):
        check(route, payload)
        seen.add(route)
    return seen


@pytest.mark.parametrize("run", _runs(SAMPLES), ids=lambda r: r.name)
def test_sample_payloads_conform(run: RunInfo) -> None:
    seen = _check_run(run)
    assert ROUTES_WITH_PAYLOADS | {"/distributed", "/diff"} <= seen


def test_samples_cover_the_optional_routes() -> None:
    """samples/ hold memory-timeline exports, module events and communication ops, so the
    per-run test above checked those payloads too (not just their empty forms)."""
    runs = {r.name: r for r in _runs(SAMPLES)}
    cnn = runs["cnn_bs32"]
    assert matching_timeline(cnn.workers["vm_9710"][0].ref.name, cnn.memory_timelines)
    ddp = load_trace(runs["ddp_gloo"].workers["vm_9852_rank0"][0].ref, use_cache=False)
    assert build_view(ddp, "modules")["available"] is True
    assert build_distributed_view({"rank0": ddp})["comm_ops"]["rank0"]["rows"]


@needs_shared
@pytest.mark.parametrize("run", _runs(SHARED_TRACES), ids=lambda r: r.name)
def test_shared_trace_payloads_conform(run: RunInfo) -> None:
    _check_run(run)


# -- catalogue, loading and error replies ----------------------------------------------------


def _parsed_store(tmp_path: Path) -> RunStore:
    """A store over samples/ whose files were parsed into its cache the way a parser child does
    (summary stored with the table), so every span reports its real state; no pool, no thread."""
    cache = TraceCache(tmp_path / "cache")
    runs = discover_runs(str(SAMPLES))
    for run in runs:
        for spans in run.workers.values():
            for span in spans:
                table = load_trace(span.ref, cache=cache)
                store_summary(cache, span.ref, summarize(table))
    store = RunStore(str(SAMPLES), cache=cache, config=Settings())
    store.start()  # every file's summary is cached: the first scan marks them all parsed
    assert store.wait_first_scan(60)
    return store


def test_catalogue_replies_conform(tmp_path: Path) -> None:
    store = _parsed_store(tmp_path)
    listing = store.listing()
    check("/runs", listing)
    assert {s["state"] for r in listing["runs"] for w in r["workers"] for s in w["spans"]} == {
        "ok"}
    for run in listing["runs"]:
        check("/views", store.views(run["name"]))
        for view in run["views"]:
            check("/workers", store.workers(run["name"], view))
        for worker in run["workers"]:
            check("/spans", store.spans(run["name"], worker["name"]))
            for span in worker["spans"]:
                check("/status", store.status(run["name"], worker["name"], span["span"]))


@pytest.mark.parametrize("error", [BadRequest("bad width"),
                                   Unprocessable("cannot parse", ["line 3: bad JSON"])])
def test_error_replies_conform(error: Any) -> None:
    body = encode_json(error.body())
    assert msgspec.json.decode(body, type=REPLIES["error"], strict=True) == json.loads(body)


def test_loading_reply_conforms() -> None:
    body = encode_json(StillLoading(0.25, "queued").body())
    assert msgspec.json.decode(body, type=REPLIES["loading"], strict=True) == json.loads(body)


# -- the check can fail ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cnn_table() -> TraceTable:
    run = next(r for r in _runs(SAMPLES) if r.name == "cnn_bs32")
    return load_trace(run.workers["vm_9710"][0].ref, use_cache=False)


def test_a_wrong_type_is_rejected(cnn_table: TraceTable) -> None:
    overview = json.loads(encode_json(build_view(cnn_table, "overview")))
    overview["steps"][0]["total_us"] = "12.5"
    with pytest.raises(msgspec.ValidationError, match=r"steps\[0\].total_us"):
        check("/overview", overview)
    operators = json.loads(encode_json(build_view(cnn_table, "operators")))
    operators["rows"][0]["calls"] = 1.5  # counts are integers
    with pytest.raises(msgspec.ValidationError, match=r"rows\[0\].calls"):
        check("/operators", operators)
    search = json.loads(encode_json(build_view(cnn_table, "timeline_search", query="a")))
    del search["matches"][0]["track"]
    with pytest.raises(msgspec.ValidationError, match="track"):
        check("/timeline/search", search)


def test_an_undeclared_key_is_reported(cnn_table: TraceTable) -> None:
    operators = json.loads(encode_json(build_view(cnn_table, "operators")))
    operators["rows"][1]["flops"] = 3
    typed = msgspec.json.decode(json.dumps(operators), type=PAYLOADS["/operators"], strict=True)
    assert undeclared(typed, operators) == ["$.rows[1].flops"]
    with pytest.raises(AssertionError):
        check("/operators", operators)


def test_closed_string_sets_are_enforced(cnn_table: TraceTable) -> None:
    pies = json.loads(encode_json(build_operator_pies(cnn_table)))
    pies["host_self"] = None  # allowed: no operator qualifies
    check("/operators/pies", pies)
    operators = json.loads(encode_json(build_view(cnn_table, "operators")))
    operators["sort_by"] = "calls"
    with pytest.raises(msgspec.ValidationError, match="sort_by"):
        check("/operators", operators)


# -- schema ---------------------------------------------------------------------------------------


def test_schema_components_describe_every_payload() -> None:
    types = list(dict.fromkeys([*PAYLOADS.values(), *REPLIES.values()]))
    refs, components = msgspec.json.schema_components(
        types, ref_template="#/components/schemas/{name}")
    of_type = dict(zip(types, refs))
    by_route = {route: of_type[payload] for route, payload in PAYLOADS.items()}
    assert by_route["/overview"] == {"$ref": "#/components/schemas/OverviewPayload"}
    assert by_route["/views"] == {"type": "array", "items": {
        "type": "string", "description": "A view (tab) name of `/viewspecs`, e.g. `Overview`, "
        "`Kernel`."}}
    for route, ref in by_route.items():
        if "$ref" not in ref:
            continue
        schema = components[ref["$ref"].rsplit("/", 1)[1]]
        assert schema["type"] == "object" and schema["description"], route
        undocumented = [k for k, v in schema["properties"].items() if not v.get("description")]
        assert undocumented == [], route
    breakdown = components["StepBreakdown"]
    assert set(breakdown["required"]) == {"Kernel", "Memcpy", "Memset", "Communication",
                                          "Runtime", "DataLoader", "CPU Exec", "Other"}
    assert components["KernelRow"]["properties"]["blocks_per_sm"]["anyOf"][1] == {"type": "null"}
