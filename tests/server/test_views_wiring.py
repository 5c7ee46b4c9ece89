"""Wiring tests of the Trace, Memory, Distributed, Module and Diff routes, end to end on the
session's main TensorBoard (conftest.py): samples/ copies (cnn_bs32/cnn_bs64 with memory, modules
and memory-timeline exports; ddp_gloo with 2 gloo ranks; ddp_broken; export_only), generated
traces, and ../shared/traces when present.

Payloads are compared with the same registry builders run in this process on the same files
(`views.registry.build_view`), so these check wiring (routes, options, file selection, caching,
encoding, errors), not the numbers: the analysis tests do that. The last tests check that every
view spec is served and that the CLI answers bad options with the server's message.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tb_plugin import cli
from tb_plugin.discovery import RunInfo, discover_runs, matching_timeline
from tb_plugin.ingest import TraceTable
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import plain
from tb_plugin.views.modules.spec import module_rows
from tb_plugin.views.registry import SPECS, build_view
from tests.support import need

from .harness import TIMINGS, Reply, TensorBoard, assert_error

CNN = {"run": "cnn_bs32", "worker": "vm_9710", "span": "1"}
CNN64 = {"exp_run": "cnn_bs64", "exp_worker": "vm_9710", "exp_span": "1"}
GPU = {"run": "gen_gpu", "worker": "w0", "span": "1"}
DDP = ("vm_9852_rank0", "vm_9853_rank1")
MAX_TIMELINE_BYTES = 1 << 20


# -- helpers --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loaded(tb: TensorBoard) -> dict[str, Any]:
    return tb.wait_loaded(timeout=150)


@pytest.fixture(scope="module")
def runs(logdir: Path) -> dict[str, RunInfo]:
    return {run.name: run for run in discover_runs(str(logdir))}


@pytest.fixture(scope="module")
def tables(runs: dict[str, RunInfo]) -> Any:
    """In-process tables of the logdir's files: (run, worker, span) -> TraceTable."""
    memo: dict[tuple[str, str, str], TraceTable] = {}

    def get(run: str, worker: str, span: str) -> TraceTable:
        key = (run, worker, span)
        if key not in memo:
            memo[key] = load_trace(runs[run].span_file(worker, span).ref)
        return memo[key]

    return get


def ok(reply: Reply) -> Any:
    assert reply.status == 200, (reply.url, reply.status, reply.body[:300])
    assert reply.header("x-content-type-options") == "nosniff", reply.url
    return reply.json()


def csv_rows(reply: Reply) -> list[dict[str, str]]:
    assert reply.status == 200, (reply.url, reply.status, reply.body[:300])
    assert reply.header("content-type").startswith("text/csv"), reply.headers
    assert reply.header("content-disposition").startswith("attachment; filename=")
    return list(csv.DictReader(io.StringIO(reply.body.decode("utf-8"))))


def spans_of(tb: TensorBoard, run: str, view: str) -> list[dict[str, str]]:
    return [{"run": run, "worker": worker, "span": span}
            for worker in tb.get("workers", {"run": run, "view": view}).json()
            for span in tb.get("spans", {"run": run, "worker": worker}).json()]


# -- views ----------------------------------------------------------------------------------------


def test_views_and_workers_of_the_new_views(tb: TensorBoard, loaded: dict[str, Any],
                                            shared_runs: list[str]) -> None:
    views = {r["name"]: r["views"] for r in loaded["runs"]}
    assert views["cnn_bs32"] == ["Overview", "Operator", "Trace", "Memory", "Module", "Diff",
                                 "GPU Idle"]
    assert views["ddp_gloo"] == ["Overview", "Operator", "Trace", "Memory", "Distributed",
                                 "Module", "Diff", "GPU Idle"]
    assert views["export_only"] == ["Memory"]
    assert "Distributed" in views["ddp_broken"]
    assert tb.get("views", {"run": "cnn_bs32"}).json() == views["cnn_bs32"]
    assert tb.get("workers", {"run": "ddp_gloo", "view": "Distributed"}).json() == list(DDP)
    assert tb.get("workers", {"run": "ddp_gloo", "view": "Diff"}).json() == list(DDP)
    assert tb.get("workers", {"run": "cnn_bs32", "view": "Memory"}).json() == ["vm_9710"]
    assert tb.get("workers", {"run": "gen_gpu", "view": "Memory"}).json() == []
    # the Module tab stays (with its explanation) on a trace without module events
    assert {"w0", "w1", "w2"} <= set(tb.get("workers", {"run": "gen_gpu", "view": "Module"}).json())
    assert {"w0", "w1", "w2"} <= set(tb.get("workers", {"run": "gen_gpu", "view": "Trace"}).json())
    assert tb.get("workers", {"run": "export_only", "view": "Memory"}).json() == []
    expected = {"resnet50_gpu_pt19": "Memory", "ddp_2ranks_sampled": "Distributed",
                "nccl_collectives": "Distributed", "memory_timeline_raw": "Memory"}
    need(set(expected) <= set(shared_runs), f"../shared/traces/{sorted(expected)}")
    for run, view in expected.items():
        assert view in views[run], (run, views[run])


# -- Trace ----------------------------------------------------------------------------------------


def test_timeline_windows_sizes_and_parity(tb: TensorBoard, loaded: dict[str, Any],
                                          tables: Any) -> None:
    whole = ok(tb.get("timeline", CNN))
    assert whole["view"] == "timeline" and whole["width"] == 2000 and whole["tracks"]
    start, end = whole["trace_start_us"], whole["trace_end_us"]
    assert whole["start_us"] == start and whole["end_us"] == end
    mid = (start + end) / 2
    params = {**CNN, "start_us": repr(start), "end_us": repr(mid), "width": "640"}
    half = ok(tb.get("timeline", params))
    assert half["width"] == 640 and half["end_us"] == pytest.approx(mid)
    table = tables("cnn_bs32", "vm_9710", "1")
    assert half == plain(build_view(table, "timeline", start_us=start, end_us=mid, width=640))
    assert ok(tb.get("timeline", {**CNN, "start_us": repr(mid)}))["end_us"] == end  # one-sided
    assert ok(tb.get("timeline", {**CNN, "width": "16384"}))["width"] == 16384


def test_timeline_bad_windows_are_400(tb: TensorBoard, loaded: dict[str, Any]) -> None:
    for extra in ({"width": "0"}, {"width": "-5"}, {"width": "abc"}, {"width": "1.5"},
                  {"width": "16385"}, {"start_us": "10", "end_us": "10"},
                  {"start_us": "10", "end_us": "5"}, {"start_us": "nan"}, {"end_us": "inf"},
                  {"start_us": "abc"}, {"start_us": ["1", "2"]}, {"format": "csv"}):
        assert_error(tb.get("timeline", {**CNN, **extra}), 400)
    assert_error(tb.get("timeline", {**CNN, "run": "nope"}), 404)


def test_timeline_on_every_trace_stays_under_1_mb(tb: TensorBoard, loaded: dict[str, Any]
                                                  ) -> None:
    """Every worker span of every run with a Trace view, whole trace and a zoom, at 4000 px."""
    checked = 0
    for run in loaded["runs"]:
        if "Trace" not in run["views"]:
            continue
        for params in spans_of(tb, run["name"], "Trace"):
            whole = tb.get("timeline", {**params, "width": "4000"})
            body = ok(whole)
            assert len(whole.body) < MAX_TIMELINE_BYTES, (params, len(whole.body))
            TIMINGS["timeline_max_kb"] = max(TIMINGS.get("timeline_max_kb", 0),
                                             len(whole.body) // 1024)
            span = body["trace_end_us"] - body["trace_start_us"]
            zoom = {**params, "start_us": repr(body["trace_start_us"] + span * 0.4),
                    "end_us": repr(body["trace_start_us"] + span * 0.45), "width": "4000"}
            zoomed = tb.get("timeline", zoom)
            assert ok(zoomed) and len(zoomed.body) < MAX_TIMELINE_BYTES
            checked += 1
    assert checked >= 10


def test_timeline_event_details(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    timeline = ok(tb.get("timeline", {**CNN, "width": "4000"}))
    ids = [i for track in timeline["tracks"] for row in track["rows"]
           for i in row["events"]["id"]]
    assert ids
    for event_id in ids[:: max(1, len(ids) // 15)]:
        details = ok(tb.get("timeline/event", {**CNN, "id": str(event_id)}))
        assert details["id"] == event_id and details["name"]
    table = tables("cnn_bs32", "vm_9710", "1")
    assert ok(tb.get("timeline/event", {**CNN, "id": str(ids[0])})) == plain(
        build_view(table, "timeline_event", event_id=ids[0]))
    assert_error(tb.get("timeline/event", {**CNN, "id": "99999999"}), 404)
    for bad in ("-1", "abc", "1.0", ""):
        assert_error(tb.get("timeline/event", {**CNN, "id": bad}), 400)
    assert_error(tb.get("timeline/event", CNN), 400)


def test_timeline_search(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    found = ok(tb.get("timeline/search", {**CNN, "q": "CONV"}))
    assert found["total"] > 0 and found["matches"] and not found["truncated"]
    assert all("conv" in m["name"].lower() for m in found["matches"])
    table = tables("cnn_bs32", "vm_9710", "1")
    assert found == plain(build_view(table, "timeline_search", query="CONV", limit=200))
    one = ok(tb.get("timeline/search", {**CNN, "q": "conv", "limit": "1"}))
    assert len(one["matches"]) == 1 and one["truncated"] and one["total"] == found["total"]
    later = ok(tb.get("timeline/search", {**CNN, "q": "conv",
                                          "start_us": repr(found["matches"][-1]["ts"])}))
    assert 1 <= later["total"] < found["total"]
    rows = csv_rows(tb.get("timeline/search", {**CNN, "q": "conv", "format": "csv"}))
    assert [int(r["id"]) for r in rows] == [m["id"] for m in found["matches"]]
    assert ok(tb.get("timeline/search", {**CNN, "q": "no such name at all"}))["total"] == 0
    for extra in ({}, {"q": ""}, {"q": "x", "limit": "0"}, {"q": "x", "limit": "10001"}):
        assert_error(tb.get("timeline/search", {**CNN, **extra}), 400)


def test_trace_download_is_the_file(tb: TensorBoard, loaded: dict[str, Any],
                                    runs: dict[str, RunInfo]) -> None:
    for params, kind in ((CNN, "application/gzip"), (GPU, "application/json"),
                         ({"run": "mixed", "worker": "badjson", "span": "default"},
                          "application/json")):  # a broken file downloads too
        ref = runs[params["run"]].span_file(params["worker"], params["span"]).ref
        reply = tb.get("trace/download", params)
        assert reply.status == 200, reply.body[:200]
        assert reply.body == Path(ref.path).read_bytes()
        assert reply.header("content-type").startswith(kind), reply.headers
        assert reply.header("content-disposition") == f'attachment; filename="{ref.name}"'
        assert reply.header("x-content-type-options") == "nosniff"
        assert reply.header("content-length") == str(ref.size)
        assert not reply.header("content-encoding")
        head = tb.fetch(tb.plugin_url("trace/download", params), method="HEAD")
        assert head.status == 200 and head.body == b""
        assert head.header("content-length") == str(ref.size)
    assert_error(tb.get("trace/download", {**CNN, "span": "9"}), 404)
    assert_error(tb.get("trace/download", {**CNN, "worker": "../vm_9710"}), 404)
    assert_error(tb.get("trace/download", {"run": "cnn_bs32"}), 400)


# -- Memory ---------------------------------------------------------------------------------------


def test_memory(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    memory = ok(tb.get("memory", CNN))
    table = tables("cnn_bs32", "vm_9710", "1")
    assert memory == plain(build_view(table, "memory"))
    assert memory["devices"] == ["CPU"] and memory["curves"]["CPU"]["t_us"]
    assert memory["events"]["rows"] and memory["operators"]["rows"]
    assert ok(tb.get("memory", {**CNN, "device": "CPU"}))["devices"] == ["CPU"]
    t = memory["curves"]["CPU"]["t_us"]
    window = {**CNN, "start_us": repr(t[len(t) // 4]), "end_us": repr(t[len(t) // 2])}
    ranged = ok(tb.get("memory", window))
    assert ranged["range_us"] == [t[len(t) // 4], t[len(t) // 2]]
    assert ranged == plain(build_view(table, "memory", start_us=t[len(t) // 4],
                                      end_us=t[len(t) // 2]))
    assert ok(tb.get("memory", window)) == ranged  # the in-memory copy
    rows = csv_rows(tb.get("memory", {**CNN, "format": "csv"}))
    assert {r["table"] for r in rows} == {"operators", "events"}
    assert sum(r["table"] == "events" for r in rows) == len(memory["events"]["rows"])
    error = assert_error(tb.get("memory", {**CNN, "device": "GPU7"}), 404)
    assert "GPU7" in error["message"]
    assert_error(tb.get("memory", GPU), 404)  # no Memory view: no memory events, no export
    for extra in ({"start_us": "5", "end_us": "5"}, {"start_us": "x"}, {"end_us": "nan"}):
        assert_error(tb.get("memory", {**CNN, **extra}), 400)


def test_memory_on_shared_gpu_trace(tb: TensorBoard, loaded: dict[str, Any],
                                    shared_runs: list[str]) -> None:
    need("resnet50_gpu_pt19" in shared_runs, "../shared/traces/resnet50_gpu_pt19")
    params = {"run": "resnet50_gpu_pt19", "worker": "worker0", "span": "1"}
    memory = ok(tb.get("memory", params))
    gpus = [d for d in memory["devices"] if d.startswith("GPU")]
    assert gpus
    one = ok(tb.get("memory", {**params, "device": gpus[0]}))
    assert list(one["curves"]) == [gpus[0]]


def test_memory_timeline(tb: TensorBoard, loaded: dict[str, Any], tables: Any,
                         runs: dict[str, RunInfo], shared_runs: list[str]) -> None:
    run = runs["cnn_bs32"]
    for span in ("1", "2"):
        params = {**CNN, "span": span}
        payload = ok(tb.get("memory/timeline", params))
        ref = matching_timeline(run.span_file("vm_9710", span).ref.name, run.memory_timelines)
        assert ref is not None
        assert payload == plain(build_view(tables("cnn_bs32", "vm_9710", span),
                                           "memory_timeline", ref))
        assert payload["records"] > 0 and payload["total"]
    rows = csv_rows(tb.get("memory/timeline", {**CNN, "format": "csv"}))
    assert rows and {"t_us", "PARAMETER", "total"} <= set(rows[0])
    alone = ok(tb.get("memory/timeline", {"run": "export_only"}))
    assert alone == plain(build_view(None, "memory_timeline",
                                     runs["export_only"].memory_timelines[0]))
    error = assert_error(tb.get("memory/timeline", {"run": "ddp_gloo", "worker": DDP[0],
                                                    "span": "1"}), 404)
    assert "export" in error["message"]
    assert_error(tb.get("memory/timeline", {"run": "cnn_bs32"}), 400)  # two exports: which?
    assert_error(tb.get("memory/timeline", {"run": "cnn_bs32", "worker": "vm_9710"}), 400)
    assert_error(tb.get("memory/timeline", {"run": "gen_gpu"}), 404)
    # /runs says which spans have an export, so the UI never asks for a 404 (issue 18)
    listing = {r["name"]: r for r in ok(tb.get("runs"))["runs"]}
    flags = {(r, w["name"], s["span"]): s["memory_timeline"]
             for r in ("cnn_bs32", "ddp_gloo") for w in listing[r]["workers"] for s in w["spans"]}
    assert flags[("cnn_bs32", "vm_9710", "1")] is True and flags[("cnn_bs32", "vm_9710", "2")]
    assert not any(v for (r, _, _), v in flags.items() if r == "ddp_gloo")


# -- Distributed ----------------------------------------------------------------------------------


def test_memory_timeline_of_a_shared_export(tb: TensorBoard, shared_runs: list[str]) -> None:
    need("memory_timeline_raw" in shared_runs, "../shared/traces/memory_timeline_raw")
    assert ok(tb.get("memory/timeline", {"run": "memory_timeline_raw"}))["records"] > 0


def test_distributed(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    for span in ("1", "2"):
        payload = ok(tb.get("distributed", {"run": "ddp_gloo", "span": span}))
        assert payload["workers"] == list(DDP) and payload["skipped"] == {}
        expected = build_view({w: tables("ddp_gloo", w, span) for w in DDP}, "distributed", {})
        assert payload == plain(expected)
        assert all(payload["comm_ops"][w]["rows"] for w in DDP)
    rows = csv_rows(tb.get("distributed", {"run": "ddp_gloo", "span": "1", "format": "csv"}))
    assert {r["worker"] for r in rows} == set(DDP) and "gloo:all_reduce" in {
        r["name"] for r in rows}
    assert_error(tb.get("distributed", {"run": "ddp_gloo", "span": "9"}), 404)
    assert_error(tb.get("distributed", {"run": "cnn_bs32", "span": "1"}), 404)
    assert_error(tb.get("distributed", {"run": "nope", "span": "1"}), 404)
    assert_error(tb.get("distributed", {"run": "ddp_gloo"}), 400)


def test_overview_run(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    """The run-level advice of a span, from the workers' cached advice summaries."""
    payload = ok(tb.get("overview/run", {"run": "ddp_gloo", "span": "1"}))
    expected = build_view({w: tables("ddp_gloo", w, "1") for w in DDP}, "overview_run", {})
    assert payload == plain(expected) and payload["skipped"] == {}
    assert_error(tb.get("overview/run", {"run": "nope", "span": "1"}), 404)
    assert_error(tb.get("overview/run", {"run": "ddp_gloo"}), 400)


def test_whatif_run(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    """The run-level what-if of a span, from the workers' cached distributed summaries."""
    params = {"run": "ddp_gloo", "span": "1", "edit": "straggler=0"}
    payload = ok(tb.get("whatif/run", params))
    expected = build_view({w: tables("ddp_gloo", w, "1") for w in DDP}, "whatif_run", {},
                          edit="straggler=0")
    assert payload == plain(expected) and payload["skipped"] == {}
    assert_error(tb.get("whatif/run", {**params, "edit": "launch=0"}), 400)
    assert_error(tb.get("whatif/run", {**params, "run": "nope"}), 404)
    assert_error(tb.get("whatif/run", {"run": "ddp_gloo", "edit": "straggler=0"}), 400)


def test_distributed_degrades_with_broken_workers(tb: TensorBoard, loaded: dict[str, Any]
                                                  ) -> None:
    one = ok(tb.get("distributed", {"run": "ddp_broken", "span": "1"}))
    assert one["workers"] == ["vm_9852_rank0"]
    assert list(one["skipped"]) == ["vm_9999_rank2"]
    assert any(m.startswith("vm_9999_rank2: left out") for m in one["messages"])
    two = ok(tb.get("distributed", {"run": "ddp_broken", "span": "2"}))
    assert "no span" in two["skipped"]["vm_9999_rank2"]


def test_distributed_on_shared_traces(tb: TensorBoard, loaded: dict[str, Any],
                                      shared_runs: list[str]) -> None:
    names = ["ddp_2ranks_sampled", "nccl_collectives"]
    need(set(names) <= set(shared_runs), f"../shared/traces/{names}")
    for name in names:
        payload = ok(tb.get("distributed", {"run": name, "span": "1"}))
        assert payload["workers"] and payload["comm_ops"]


# -- Module ---------------------------------------------------------------------------------------


def test_modules(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    payload = ok(tb.get("modules", CNN))
    assert payload["available"] is True and payload["rows"] and payload["flamegraph"]
    assert payload == plain(build_view(tables("cnn_bs32", "vm_9710", "1"), "modules"))
    rows = csv_rows(tb.get("modules", {**CNN, "format": "csv"}))
    assert len(rows) == len(module_rows(payload))
    assert {"depth", "key", "name"} <= set(rows[0])
    ddp = ok(tb.get("modules", {"run": "ddp_gloo", "worker": DDP[0], "span": "1"}))
    assert ddp["available"]
    assert_error(tb.get("modules", GPU), 404)


# -- Diff -----------------------------------------------------------------------------------------


def test_diff(tb: TensorBoard, loaded: dict[str, Any], tables: Any) -> None:
    root = ok(tb.get("diff", {**CNN, **CNN64}))
    base, exp = tables("cnn_bs32", "vm_9710", "1"), tables("cnn_bs64", "vm_9710", "1")
    assert root == plain(build_view(base, "diff", exp))
    assert root["path"] == "0" and root["children"] and root["per_step"] is True
    child = next(c for c in root["children"] if c["expandable"])
    node = ok(tb.get("diff", {**CNN, **CNN64, "path": child["path"]}))
    assert node["path"] == child["path"] and node["left"] == child["left"]
    assert node == plain(build_view(base, "diff", exp, path=child["path"]))
    rows = csv_rows(tb.get("diff", {**CNN, **CNN64, "format": "csv"}))
    assert len(rows) == len(root["operator_deltas"]) and "delta_calls" in rows[0]
    same_run = ok(tb.get("diff", {**CNN, "exp_run": "cnn_bs32", "exp_worker": "vm_9710",
                                  "exp_span": "2"}))
    assert same_run["base"]["steps"] == same_run["exp"]["steps"] == 2
    for path in ("0-999", "x", "1", "0--1"):
        assert_error(tb.get("diff", {**CNN, **CNN64, "path": path}), 404)
    assert_error(tb.get("diff", {**CNN, **CNN64, "exp_run": "nope"}), 404)
    assert_error(tb.get("diff", {**CNN, **CNN64, "exp_worker": "../vm_9710"}), 404)
    assert_error(tb.get("diff", {**CNN, "exp_run": "cnn_bs64", "exp_worker": "vm_9710"}), 400)
    broken = {"exp_run": "mixed", "exp_worker": "badjson", "exp_span": "default"}
    assert_error(tb.get("diff", {**CNN, **broken}), 422)


# -- the registry ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The CLI's parsed-trace cache, shared by this module's CLI runs."""
    return str(tmp_path_factory.mktemp("cli-cache"))


def test_every_spec_route_is_served(tb: TensorBoard, loaded: dict[str, Any]) -> None:
    """Without its parameters, every spec's route answers its own 400 (not the catch-all 404
    for unknown routes), with nosniff; `/viewspecs` lists every view."""
    for spec in SPECS.values():
        reply = tb.get(spec.route.strip("/"), {})
        assert_error(reply, 400)
        assert reply.header("x-content-type-options") == "nosniff", reply.url
    names = [v["name"] for v in ok(tb.get("viewspecs", {}))["views"]]
    assert names == ["Overview", "Operator", "Kernel", "Trace", "Memory", "Distributed",
                     "Module", "Diff", "GPU Idle", "Inference"]


@pytest.mark.parametrize("route, params, flags, status", [
    ("timeline", {"width": "0"}, ("--view", "timeline", "--width", "0"), 400),
    ("timeline", {"width": "wide"}, ("--view", "timeline", "--width", "wide"), 400),
    ("timeline", {"start_us": "5", "end_us": "1"},
     ("--view", "timeline", "--start-us", "5", "--end-us", "1"), 400),
    ("timeline/search", {"q": "a", "limit": "10001"},
     ("--view", "timeline_search", "--query", "a", "--limit", "10001"), 400),
    ("operators/pies", {"group_by": "kernel"},
     ("--view", "operator_pies", "--group-by", "kernel"), 400),
    ("operators/pies", {"top_n": "-1"}, ("--view", "operator_pies", "--top-n", "-1"), 400),
    ("memory", {"start_us": "nan"}, ("--view", "memory", "--start-us", "nan"), 400),
    ("memory", {"device": "GPU7"}, ("--view", "memory", "--device", "GPU7"), 404),
    ("timeline/event", {"id": "99999999"},
     ("--view", "timeline_event", "--event-id", "99999999"), 404),
])
def test_cli_and_server_reject_options_alike(tb: TensorBoard, loaded: dict[str, Any],
                                            logdir: Path, cli_cache: str,
                                            capsys: pytest.CaptureFixture[str], route: str,
                                            params: dict[str, str], flags: tuple[str, ...],
                                            status: int) -> None:
    """Bounds, wrong types, bad windows, unknown names: one message, a 400/404 or exit 2."""
    error = assert_error(tb.get(route, {**CNN, **params}), status)
    code = cli.main(["--cache-dir", cli_cache, "report", str(logdir), "--run", "cnn_bs32",
                     "--worker", "vm_9710", "--span", "1", *flags])
    out, err = capsys.readouterr()
    assert (code, out, err) == (2, "", f"error: {error['message']}\n")


def test_cli_prints_the_server_payload(tb: TensorBoard, loaded: dict[str, Any], logdir: Path,
                                       cli_cache: str, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    for route, params, flags in (
            ("operators/pies", {"top_n": "3"}, ("--view", "operator_pies", "--top-n", "3")),
            ("kernels/pies", {}, ("--view", "kernel_pies")),
            ("timeline", {"width": "300"}, ("--view", "timeline", "--width", "300"))):
        at = GPU if route.startswith("kernels") else CNN
        reply = tb.get(route, {**at, **params})
        code = cli.main(["--cache-dir", cli_cache, "report", str(logdir), "--run",
                         at["run"], "--worker", at["worker"], "--span", at["span"], *flags])
        assert code == 0 and json.loads(capsys.readouterr().out) == ok(reply), route
