"""Fast in-process tests of the server modules (no TensorBoard process)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pytest
from tensorboard.plugins import base_plugin
from werkzeug.test import Client, EnvironBuilder
from werkzeug.wrappers import Response

from tb_plugin.analysis.features import features, summarize
from tb_plugin.cache import TraceCache
from tb_plugin.ingest.schema import LoadState
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import encode_json
from tb_plugin.output.tabular import csv_filename, tabulate, to_csv
from tb_plugin.server import static
from tb_plugin.server.api import Query, endpoint
from tb_plugin.server.errors import BadRequest
from tb_plugin.server.filestate import (
    LOADING,
    RETRY_MIN_S,
    RETRY_SILENT_S,
    FileState,
    modified_at,
    retry_hint,
    run_state,
)
from tb_plugin.server.jobs import RUN_PRIORITY, WANTED_PRIORITY, batchable
from tb_plugin.server.memo import MemoryLRU, SingleFlight
from tb_plugin.server.parse_child import (
    HANDOVER_MAX_JSON_BYTES,
    parse_file,
    peek_summary,
    store_summary,
)
from tb_plugin.server.plugin import CATCH_ALL, PLUGIN_NAME, TorchProfPlugin, resolve_logdir
from tb_plugin.server.pool import (
    BASE_MEMORY,
    JobQueue,
    LoadJob,
    LoadOutcome,
    LoadPool,
    admits,
    estimate_memory,
    hands_over,
)
from tb_plugin.server.store import RunStore
from tb_plugin.server.tables import table_budget
from tb_plugin.settings import Settings
from tb_plugin.span_workers import NoWorkerHasSpan, NoWorkerReadable, span_workers
from tb_plugin.storage import FileRef, open_ref
from tb_plugin.views.registry import build_view
from tb_plugin.views.tabs import RunFacts, views_of_file, views_of_run

OPENAPI = Path(__file__).resolve().parents[2] / "tb_plugin" / "openapi.yaml"

#: The default settings (max_inflate_ratio 100), passed in as the server passes its own.
CONFIG = Settings()


def _context(logdir: str = "", logdir_spec: str = "") -> base_plugin.TBContext:
    flags = argparse.Namespace(logdir=logdir, logdir_spec=logdir_spec)
    return base_plugin.TBContext(logdir=logdir, flags=flags)


def documented_paths() -> set[str]:
    text = OPENAPI.read_text()
    block = text.split("\npaths:\n", 1)[1].split("\ncomponents:\n", 1)[0]
    return {m.group(1) for m in re.finditer(r"^  (/\S*):\s*$", block, re.MULTILINE)}


def test_routes_equal_the_openapi_document() -> None:
    plugin = TorchProfPlugin(_context("/nonexistent"))
    apps = plugin.get_plugin_apps()
    assert apps.pop(CATCH_ALL)  # the JSON 404 for unknown routes, not part of the API
    routes = {path.replace("/*", "/{file}") for path in apps}
    assert routes == documented_paths()


def test_plugin_metadata() -> None:
    plugin = TorchProfPlugin(_context("/nonexistent"))
    assert re.fullmatch(r"[A-Za-z0-9_-]+", PLUGIN_NAME) and plugin.plugin_name == "torch_prof"
    meta = plugin.frontend_metadata()
    assert meta.es_module_path == "/index.js" and meta.tab_name == "PyTorch Profiler"
    assert meta.disable_reload is True


def test_logdir_from_spec() -> None:
    assert resolve_logdir(_context("/a/b")) == "/a/b"
    assert resolve_logdir(_context("", "first:/x/y,second:/z")) == "/x/y"
    assert resolve_logdir(_context("", "/only/path")) == "/only/path"
    assert resolve_logdir(_context("", "s3://bucket/runs")) == "s3://bucket/runs"
    assert resolve_logdir(_context("", "")) == ""


# -- tabular --------------------------------------------------------------------------------------


def test_tabulate_shapes() -> None:
    records = {"rows": [{"name": "a", "calls": 1, "t": {"self": 2.0}}, {"name": "b", "x": None}]}
    assert tabulate(records) == (["name", "calls", "t.self", "x"],
                                 [["a", 1, 2.0, None], ["b", None, None, None]])
    ref_style = {"columns": [{"name": "Name"}, {"name": "Total"}], "rows": [["k", 3]]}
    assert tabulate(ref_style) == (["Name", "Total"], [["k", 3]])
    pies = {"device_self": {"slices": [{"name": "a", "value": 1}], "other": 0},
            "host_self": None, "host_total": {"slices": [{"name": "b", "value": 2}]}}
    columns, rows = tabulate(pies)
    assert columns == ["section", "name", "value"]
    assert rows == [["device_self", "a", 1], ["host_total", "b", 2]]
    assert tabulate({"a": 1, "b": {"c": 2}}) == (["a", "b.c"], [[1, 2]])


def test_csv_is_spreadsheet_safe() -> None:
    body = to_csv((["name", "value"], [["=HYPERLINK(1)", -1], ["+x", 2.5], ["ok", None]]))
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows == [["name", "value"], ["'=HYPERLINK(1)", "-1"], ["'+x", "2.5"], ["ok", ""]]
    name = csv_filename('a/b"c', "w 0", "1", "operators/pies")
    assert re.fullmatch(r"[A-Za-z0-9._-]+\.csv", name), name


# -- memo -----------------------------------------------------------------------------------------


def test_lru_is_bounded_by_bytes_and_keeps_the_newest() -> None:
    lru: MemoryLRU[str] = MemoryLRU(100)
    lru.put("a", "A", 60)
    lru.put("b", "B", 30)
    assert lru.get("a") == "A"  # now most recent
    lru.put("c", "C", 30)  # evicts b (least recently used)
    assert lru.get("b") is None and lru.get("a") == "A" and lru.get("c") == "C"
    lru.put("huge", "H", 500)  # alone over budget: kept, everything else evicted
    assert lru.get("huge") == "H" and len(lru) == 1 and lru.nbytes == 500


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll an observable state until it holds (the timeout only guards against a hang)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_single_flight_computes_once() -> None:
    flight, calls, gate = SingleFlight(), [], threading.Event()

    def compute() -> int:
        calls.append(1)
        gate.wait(10)
        return 42

    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(flight.do("k", compute)))
               for _ in range(20)]
    for thread in threads:
        thread.start()
    assert wait_until(lambda: flight.waiting("k") == 19)  # all joined the owner's run
    gate.set()
    for thread in threads:
        thread.join(5)
    assert results == [42] * 20 and len(calls) == 1

    def boom() -> int:
        raise ValueError("x")

    with pytest.raises(ValueError):
        flight.do("k", boom)
    assert flight.do("k", lambda: 7) == 7  # failures are not remembered
    assert flight.waiting("k") == 0


# -- api ------------------------------------------------------------------------------------------


def test_encode_json_handles_numpy_and_non_finite() -> None:
    payload = {"a": np.int64(3), "b": np.float32(1.5), "c": math.nan, "d": np.array([1, 2]),
               "e": np.bool_(True), "f": math.inf, "g": np.float64("nan")}
    assert encode_json(payload) == (b'{"a":3,"b":1.5,"c":null,"d":[1,2],"e":true,"f":null,'
                                    b'"g":null}')


def _query(qs: str) -> Query:
    return Query(EnvironBuilder(query_string=qs).get_request())


def test_query_validation() -> None:
    assert _query("run=a").text("run") == "a"
    assert _query("group_by=kernel").choice("group_by", ("kernel", "x"), "x") == "kernel"
    assert _query("").choice("group_by", ("kernel", "x"), "x") == "x"
    for qs, call in [("", lambda q: q.text("run")), ("run=a&run=b", lambda q: q.text("run")),
                     ("run=", lambda q: q.text("run")),
                     ("g=z", lambda q: q.choice("g", ("a",), "a")),
                     ("run=a%00b", lambda q: q.text("run"))]:
        with pytest.raises(BadRequest):
            call(_query(qs))


def test_endpoint_turns_bugs_into_short_json_500() -> None:
    def broken(_request: Any) -> Any:
        raise RuntimeError("secret detail /home/user/x")

    client = Client(endpoint(broken), Response)
    reply = client.get("/x")
    assert reply.status_code == 500
    assert reply.json == {"error": {"code": 500, "message":
                                    "internal error (RuntimeError); see the TensorBoard log"}}
    assert reply.headers["X-Content-Type-Options"] == "nosniff"
    assert client.post("/x").status_code == 405


# -- static ---------------------------------------------------------------------------------------


def test_static_exact_names_content_types_and_csp(tmp_path: Path) -> None:
    root = tmp_path / "static"
    (root / "assets").mkdir(parents=True)
    (root / "index.js").write_text("export function render() {}")
    (root / "assets" / "page.html").write_text("<p>hi</p>")
    (root / "assets" / "a.css").write_text("p{}")
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    (root / "assets" / "link.txt").symlink_to(tmp_path / "secret.txt")
    assert set(static.listing(root)) == {"index.js", "assets/page.html", "assets/a.css"}

    def app(name: str) -> Any:
        return Client(endpoint(lambda r: static.serve(r, name, root=root)), Response).get("/")

    js = app("index.js")
    assert js.status_code == 200 and js.headers["Content-Type"].startswith(
        "application/javascript") and js.data == b"export function render() {}"
    html = app("assets/page.html")
    assert html.headers["Content-Type"].startswith("text/html")
    policy = dict(part.split(" ", 1) for part in html.headers["Content-Security-Policy"].split(";"))
    assert policy["object-src"] == "'none'" and "unsafe-inline" not in policy["script-src"]
    assert app("assets/a.css").headers["Content-Type"].startswith("text/css")
    for name in ("assets/link.txt", "../secret.txt", "assets/../index.js", "/index.js",
                 str(root / "index.js"), "assets", ""):
        reply = app(name)
        assert reply.status_code == 404 and b"TOPSECRET" not in reply.data, name
        assert reply.headers["X-Content-Type-Options"] == "nosniff"


# -- store and pool -------------------------------------------------------------------------------


def _ref(mtime: str, size: int = 10, path: str = "/x/w.pt.trace.json") -> FileRef:
    return FileRef(None, path, size, mtime)


def test_retry_hint_is_the_estimated_rest_of_the_parse() -> None:
    def loading(progress: float, first: Optional[tuple[float, float]], at: Optional[float],
                state: str = LOADING) -> FileState:
        return FileState(_ref("1"), "id", state=state, progress=progress, first_progress=first,
                         progress_at=at)

    # (1 - p) * (t - t1) / (p - p1) - (now - t), within [0.1, 1] s
    half = loading(0.6, (100.0, 0.2), 100.4)  # 0.4 of the file in 0.4 s: 1.0 per s
    assert retry_hint([half], now=100.4) == pytest.approx(0.4)
    assert retry_hint([half], now=100.5) == pytest.approx(0.3)  # 0.1 s since that report
    assert retry_hint([loading(0.3, (100.0, 0.1), 100.4)], now=100.4) == 1.0  # 1.4 s: ceiling
    assert retry_hint([loading(0.95, (100.0, 0.5), 100.3)], now=100.3) == RETRY_MIN_S  # 0.033
    fast = loading(0.8, (100.0, 0.2), 100.3)  # 2 per s: 0.1 s left at 100.3, none at 100.4
    assert retry_hint([half, fast], now=100.4) == pytest.approx(0.4)  # the longest
    slow = loading(0.5, (100.0, 0.1), 100.8)  # 0.5 per s: 1.0 s left at 100.8
    assert retry_hint([half, slow], now=100.8) == pytest.approx(1.0)  # half: 0.4 - 0.4
    assert retry_hint([half, slow], now=100.5, any_one=True) == pytest.approx(0.3)  # /views
    assert retry_hint([half, FileState(_ref("1"), "q")], now=100.4, any_one=True) == (
        pytest.approx(0.4))  # the loading one will be usable first
    assert retry_hint([loading(0.3, (100.0, 0.3), 100.0)], now=100.1) == RETRY_SILENT_S  # one
    assert retry_hint([loading(0.0, None, None)], now=100.1) == RETRY_SILENT_S  # no report yet
    assert retry_hint([half, FileState(_ref("1"), "q")], now=100.4) == 1.0  # one is queued
    done = loading(1.0, (100.0, 0.2), 100.9, state=LoadState.OK)
    assert retry_hint([done, half], now=100.4) == pytest.approx(0.4)  # a done file: ignored
    assert retry_hint([done], now=100.4) == RETRY_MIN_S  # nothing pending
    # parsed, but reported loading while it is still being written: re-read when it changes
    written = FileState(FileRef(None, "/x/w.pt.trace.json", 10, str(int(101 * 1e9))), "w",
                        state=LoadState.ERROR, parsed=True, cut_off=True, progress=1.0)
    assert written.pending(101.8) and retry_hint([written], now=101.8) == 1.0


def test_modified_at_units() -> None:
    assert modified_at(_ref("1700000000123456789")) == pytest.approx(1700000000.123456789)
    assert modified_at(_ref("1700000000123")) == pytest.approx(1700000000.123)
    assert modified_at(_ref("1700000000.5")) == 1700000000.5
    assert modified_at(_ref("2024-01-02T03:04:05Z")) == pytest.approx(1704164645)
    assert modified_at(_ref("")) is None and modified_at(_ref("etag-abc")) is None


def test_recently_written_broken_file_is_reported_loading() -> None:
    now = time.time()
    fresh = FileState(_ref(str(now - 2)), "id", state="error", messages=["cut"], parsed=True)
    state, messages = fresh.report(now)
    assert state == "loading" and "still being written" in messages[0] and messages[1] == "cut"
    old = FileState(_ref(str(now - 600)), "id", state="error", messages=["cut"], parsed=True)
    assert old.report(now) == ("error", ["cut"])
    crashed = FileState(_ref(str(now - 2)), "id", state="error", messages=["bug"], parsed=False)
    assert crashed.report(now) == ("error", ["bug"])  # not a parse result: no masking
    truncated = FileState(_ref("etag"), "id", state="truncated", parsed=True, changed_at=now - 1)
    assert truncated.report(now)[0] == "truncated"


def test_run_state_and_views() -> None:
    assert run_state(["ok", "queued"]) == "loading"
    assert run_state(["error", "error"]) == "error"
    assert run_state(["ok", "error"]) == "partial"
    assert run_state(["ok", "ok"]) == "ready" and run_state([]) == "ready"
    assert views_of_run([{"kernels": 0}, {"kernels": 3}]) == [
        "Overview", "Operator", "Kernel", "Trace", "Module", "Diff", "GPU Idle"]  # two traces: Diff
    assert views_of_run([{"kernels": 0}]) == ["Overview", "Operator", "Trace", "Module",
                                              "GPU Idle"]
    assert views_of_run([]) == []


def test_pool_admission_is_bounded_by_slots_and_memory() -> None:
    small, big = _ref("1", 1000), _ref("1", 50 << 30, "/x/huge.pt.trace.json.gz")
    budget = BASE_MEMORY * 3
    assert estimate_memory(big, CONFIG) > budget
    huge = LoadJob("huge", big, estimate_memory(big, CONFIG))
    running = [LoadJob("a", small, estimate_memory(small, CONFIG))]
    assert admits(huge, [], 2, budget)  # alone: always, however big
    assert admits(LoadJob("b", small, estimate_memory(small, CONFIG)), running, 2, budget)
    assert not admits(huge, running, 2, budget)  # over the memory budget
    full = [*running, LoadJob("c", small, estimate_memory(small, CONFIG))]
    assert not admits(LoadJob("d", small, estimate_memory(small, CONFIG)), full, 2, budget)  # slots
    # issue 19: a split parse (a file dispatched alone, maybe a hostile one that runs to its
    # deadline) holds only its own slot: a healthy file starts beside it
    split = [LoadJob("a", small, estimate_memory(small, CONFIG), processes=2)]
    assert admits(LoadJob("d", small, estimate_memory(small, CONFIG)), split, 2, budget)
    split_and_one = [*split, LoadJob("b", small, estimate_memory(small, CONFIG))]
    assert not admits(LoadJob("d", small, estimate_memory(small, CONFIG)), split_and_one, 2, budget)
    crashed = [LoadJob("a", small, estimate_memory(small, CONFIG), solo=True)]
    assert not admits(LoadJob("d", small, estimate_memory(small, CONFIG)), crashed, 4, budget)


def test_parsers_hand_over_what_is_waited_for_and_cache_a_bulk_load() -> None:
    small = _ref("1", 1000)
    job = LoadJob("a", small, estimate_memory(small, CONFIG))
    assert hands_over(job, 0, remote=False)  # the only file: a cold open
    assert not hands_over(job, 1, remote=False)  # a bulk load: the parser writes the cache
    assert hands_over(LoadJob("a", small, job.estimate, priority=10), 500, remote=False)
    assert not hands_over(LoadJob("a", small, job.estimate, priority=10), 0, remote=True)
    big = _ref("1", HANDOVER_MAX_JSON_BYTES + 1)
    assert not hands_over(LoadJob("b", big, estimate_memory(big, CONFIG), priority=10), 0, False)
    edge = _ref("1", HANDOVER_MAX_JSON_BYTES)
    assert hands_over(LoadJob("b", edge, estimate_memory(edge, CONFIG)), 0, remote=False)


def test_a_run_level_view_waits_for_many_files_the_parsers_still_cache() -> None:
    """Issue 28: the files a run-level view (all ranks of a span) waits for go first in the
    queue but stay a bulk load: written to the cache by the parsers, in batches, never handed
    over one by one to the server's single writer; one file waited for is handed over."""
    small = _ref("1", 1000)
    estimate = estimate_memory(small, CONFIG)
    assert 0 < RUN_PRIORITY < WANTED_PRIORITY
    run_level = LoadJob("a", small, estimate, priority=RUN_PRIORITY)
    assert not hands_over(run_level, 500, remote=False)
    assert batchable(run_level)
    below = LoadJob("a", small, estimate, priority=WANTED_PRIORITY - 1)
    assert not hands_over(below, 500, remote=False) and batchable(below)
    wanted = LoadJob("a", small, estimate, priority=WANTED_PRIORITY)
    assert hands_over(wanted, 500, remote=False) and not batchable(wanted)


def test_pool_queue_order_requested_then_smaller_first() -> None:
    queue = JobQueue()
    for key, size in (("big", 10 << 20), ("small", 1 << 10), ("mid", 1 << 20)):
        queue.push(LoadJob(key, _ref("1", size, f"/x/{key}.pt.trace.json"), 1))
    assert queue.bump("big", 10)  # someone is waiting for it
    assert not queue.bump("big", 10) and not queue.bump("gone", 10)
    queue.remove("mid")
    queue.push(LoadJob("mid", _ref("1", 1 << 20, "/x/mid.pt.trace.json"), 1))
    order = []
    while (job := queue.pop()) is not None:
        order.append(job.key)
    assert order == ["big", "small", "mid"] and len(queue) == 0


# -- views and loading of the run-level routes ----------------------------------------------------

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_view_predicates() -> None:
    cpu = {"kernels": 0}
    assert views_of_file({**cpu, "memory_events": 3, "module_events": 2, "comm_ops": 1}) == [
        "Overview", "Operator", "Trace", "Memory", "Module", "GPU Idle"]  # not run-level ones
    assert views_of_file({**cpu, "memory_timeline": True}) == [
        "Overview", "Operator", "Trace", "Memory", "Module", "GPU Idle"]  # Module kept; n/a
    assert views_of_run([cpu], RunFacts(usable_runs=2)) == [
        "Overview", "Operator", "Trace", "Module", "Diff", "GPU Idle"]  # another run to compare
    assert views_of_run([cpu, {**cpu, "comm_ops": 4}]) == [
        "Overview", "Operator", "Trace", "Distributed", "Module", "Diff", "GPU Idle"]
    assert views_of_run([], RunFacts(usable_runs=3, memory_exports=1, trace_files=0)) == [
        "Memory"]
    assert views_of_run([], RunFacts(memory_exports=2, trace_files=2)) == []  # still loading
    assert views_of_run([cpu], RunFacts(memory_exports=1)) == [
        "Overview", "Operator", "Trace", "Module", "GPU Idle"]  # an export paired with no file
    # Inference: a serving trace only (one serving step annotation is enough; none is not)
    assert views_of_file({"kernels": 3, "serving_steps": 1}) == [
        "Overview", "Operator", "Kernel", "Trace", "Module", "GPU Idle", "Inference"]
    assert "Inference" not in views_of_file({"kernels": 3, "serving_steps": 0})


def test_features_count_comm_ops_and_module_events() -> None:
    ddp = load_trace(str(sorted((SAMPLES / "ddp_gloo").glob("*rank0*.pt.trace.json.gz"))[0]))
    found = features(ddp)
    assert found["comm_ops"] > 0 and found["module_events"] > 0 and found["memory_events"] > 0
    cnn = load_trace(str(sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]))
    assert features(cnn)["comm_ops"] == 0



class RecordingPool:
    """A parser pool (the catalogue's `Parser` seam) that parses nothing: files stay queued
    until the test reports an outcome through the callback the catalogue handed over, as
    `LoadPool` does when a child finishes."""

    def __init__(self, root: Path, on_start: Callable[[str], None],
                 on_progress: Callable[[str, float], None],
                 on_done: Callable[[LoadOutcome], None]) -> None:
        self.root, self.on_done = root, on_done
        self.submitted: list[str] = []
        self.bumped: list[str] = []

    def submit(self, job: LoadJob) -> None:
        self.submitted.append(job.key)

    def bump(self, key: str, priority: int = 10) -> None:
        self.bumped.append(key)

    def cancel(self, key: str) -> None:
        pass

    def close(self) -> None:
        pass


def _store(tmp_path: Path, pools: list[RecordingPool]) -> RunStore:
    """A store over samples/ whose parser pool parses nothing (every file stays queued)."""

    def make_pool(*args: Any) -> RecordingPool:
        pools.append(RecordingPool(*args))
        return pools[-1]

    store = RunStore(str(SAMPLES), cache=TraceCache(tmp_path / "cache"), config=Settings(),
                     pool_factory=make_pool)
    store.start()
    assert store.wait_first_scan(60)
    return store


@pytest.fixture
def queued(tmp_path: Path) -> Iterator[tuple[RunStore, RecordingPool, Client]]:
    pools: list[RecordingPool] = []
    store = _store(tmp_path, pools)
    apps = TorchProfPlugin(_context(str(SAMPLES)), provider=store).get_plugin_apps()

    def app(environ: Any, start_response: Any) -> Any:
        return apps[environ["PATH_INFO"]](environ, start_response)

    try:
        yield store, pools[0], Client(app, Response)
    finally:
        store.close()


def test_run_level_routes_answer_202_while_any_file_loads(
        queued: tuple[RunStore, RecordingPool, Client]) -> None:
    store, pool, client = queued
    files = [f for run in store.listing()["runs"] for w in run["workers"] for f in w["spans"]]
    assert files and {f["state"] for f in files} == {"queued"}
    assert len(pool.submitted) == len(files)  # nothing was cached: every file is parsed
    views = {run["name"]: run["views"] for run in store.listing()["runs"]}
    assert views["cnn_bs32"] == []  # its exports do not make it a Memory-only run meanwhile
    reply = client.get("/diff?run=cnn_bs32&worker=vm_9710&span=1&exp_run=cnn_bs64"
                       "&exp_worker=vm_9710&exp_span=2")
    assert reply.status_code == 202 and reply.json["loading"] is True
    assert reply.headers["Retry-After"] == "1"
    base = store.file("cnn_bs32", "vm_9710", "1")
    exp = store.file("cnn_bs64", "vm_9710", "2")
    assert {base.identity, exp.identity} <= set(pool.bumped)  # both sides parsed first
    for span in ("1", "2"):
        pool.on_done(LoadOutcome(store.file("ddp_gloo", "vm_9852_rank0", span).identity,
                                 summary={"state": "ok", "messages": [], "events": 1,
                                          "features": {"comm_ops": 2}}))
    assert "Distributed" in store.views("ddp_gloo")
    reply = client.get("/distributed?run=ddp_gloo&span=1")  # rank 1 is still queued
    assert reply.status_code == 202 and 0 < reply.json["progress"] < 1
    for route in ("/timeline", "/memory", "/modules", "/memory/timeline"):
        reply = client.get(f"{route}?run=cnn_bs32&worker=vm_9710&span=1")
        assert reply.status_code == 202, route
    download = client.get("/trace/download?run=cnn_bs32&worker=vm_9710&span=1")
    assert download.status_code == 200  # raw bytes need no parse
    assert download.data == Path(base.ref.path).read_bytes()
    assert store.memory_exports("cnn_bs32") and base.memory_timeline is not None


def test_distributed_is_served_from_rank_summaries_not_tables(tmp_path: Path) -> None:
    """Each rank's summary is stored next to its table when the table is cached (here: handed
    over by the parser and written by the server's cache writer); a server started later over
    that cache then answers /distributed from the summaries alone: with every cached table gone
    and the trace files' bytes destroyed (same size and mtime, so the same file version), the
    payload is still the one built from the tables."""
    logdir, cache_root = tmp_path / "logs", tmp_path / "cache"
    shutil.copytree(SAMPLES / "ddp_gloo", logdir / "ddp_gloo")
    pools: list[RecordingPool] = []

    def make_pool(*args: Any) -> RecordingPool:
        pools.append(RecordingPool(*args))
        return pools[-1]

    def new_store() -> RunStore:
        store = RunStore(str(logdir), cache=TraceCache(cache_root), config=Settings(),
                         pool_factory=make_pool)
        store.start()
        assert store.wait_first_scan(60)
        return store

    workers = ("vm_9852_rank0", "vm_9853_rank1")
    parsing = new_store()
    try:
        states = [parsing.file("ddp_gloo", w, "1") for w in workers]
        for state in states:
            parsed = parse_file(state.identity, state.ref, str(cache_root))
            pools[0].on_done(LoadOutcome(state.identity, summary=parsed.summary,
                                         table=parsed.table))
        assert parsing.wait_written(60)
    finally:
        parsing.close()
    expected = build_view({w: load_trace(s.ref.path, use_cache=False)
                           for w, s in zip(workers, states)}, "distributed", {})
    manifests = list(cache_root.rglob("manifest.json"))
    assert len(manifests) == 2
    for manifest in manifests:
        manifest.unlink()
    for state in states:
        path = Path(state.ref.path)
        stat = path.stat()
        path.write_bytes(b"x" * stat.st_size)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    store = new_store()  # its files are parsed (cached summaries): no table in memory
    try:
        apps = TorchProfPlugin(_context(str(logdir)), provider=store).get_plugin_apps()
        client = Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)
        reply = client.get("/distributed?run=ddp_gloo&span=1")
        assert reply.status_code == 200
        assert reply.json == json.loads(encode_json(expected))
        assert reply.json["collectives"]["total"] > 0
    finally:
        store.close()


def test_span_files_leave_out_broken_and_spanless_workers(
        queued: tuple[RunStore, RecordingPool, Client]) -> None:
    store, pool, client = queued
    rank0, rank1 = (store.file("ddp_gloo", w, "1") for w in ("vm_9852_rank0", "vm_9853_rank1"))
    pool.on_done(LoadOutcome(rank0.identity, summary={
        "state": "ok", "messages": [], "events": 1, "features": {"comm_ops": 2}}))
    pool.on_done(LoadOutcome(rank1.identity, error="the parser process died"))
    usable, skipped = store.span_files("ddp_gloo", "1")
    assert usable == {"vm_9852_rank0": rank0}
    assert skipped == {"vm_9853_rank1": "the parser process died"}
    missing = client.get("/status?run=ddp_gloo&worker=vm_9852_rank0&span=9")
    assert missing.status_code == 404
    reply = client.get("/distributed?run=ddp_gloo&span=9")
    assert reply.status_code == 404
    assert reply.json["error"]["message"] == "no worker of run 'ddp_gloo' has span '9'"


def test_viewed_files_are_warmed_once_in_the_background(tmp_path: Path) -> None:
    store = _store(tmp_path, [])
    state = store.file("cnn_bs32", "vm_9710", "1")
    load_trace(state.ref, cache=TraceCache(tmp_path / "cache"))  # what a parser child leaves
    calls: list[Any] = []
    finished: list[Any] = []
    started, gate = threading.Event(), threading.Event()

    def warmer(table: Any) -> None:
        calls.append(table)
        started.set()
        gate.wait(10)
        finished.append(table)

    store.add_warmer(warmer)
    try:
        assert store.warm(state) is True
        assert store.warm(state) is False  # already queued: not twice
        assert started.wait(10)
        table = store.table(state)
        assert calls == [table]
        seen: list[int] = []

        def request() -> None:  # a request needing it meanwhile shares the same run
            store.prepare(state, table, warmer)
            seen.append(len(finished))

        waiter = threading.Thread(target=request)
        waiter.start()
        gate.set()
        waiter.join(10)
        assert seen == [1]  # it returned only once the background run had finished
        assert store.wait_warmed(10)
        assert store.warm(state) is False  # done for this table: nothing queued
        store.prepare(state, table, warmer)  # ... and a later request does not run it again
        assert calls == [table] and finished == [table]
    finally:
        gate.set()
        store.close()


# -- the pieces shared with the CLI and the cache -----------------------------------------------


def test_span_workers_sorts_workers_and_says_why_none_is_usable() -> None:
    reports = {"a": ("ok", []), "b": ("error", ["cut off"]), "c": ("queued", []),
               "d": ("error", []), "e": ("truncated", ["late"])}
    found = span_workers("1", [(w, w) for w in reports] + [("f", None)], reports.__getitem__)
    assert found.usable == {"a": "a", "e": "e"} and found.pending == ["c"]
    assert found.skipped == {"b": "cut off", "d": "the file could not be read",
                             "f": "the worker has no span '1'"}
    assert found.require("r", "1") == ({"a": "a", "e": "e"}, found.skipped)
    with pytest.raises(NoWorkerHasSpan, match="no worker of run 'r' has span '2'"):
        span_workers("2", [("a", None), ("b", None)], reports.__getitem__).require("r", "2")
    broken = span_workers("1", [("b", "b"), ("f", None)], reports.__getitem__)
    with pytest.raises(NoWorkerReadable, match="no worker of span '1' could be read") as error:
        broken.require("r", "1")
    assert error.value.details() == ["b: cut off", "f: the worker has no span '1'"]


def test_peek_summary_reads_only_what_a_child_stored(tmp_path: Path) -> None:
    cache = TraceCache(tmp_path / "cache")
    ref = open_ref(str(sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]))
    assert peek_summary(cache, ref) is None
    summary = summarize(load_trace(ref, use_cache=False))
    store_summary(cache, ref, summary)
    assert peek_summary(cache, ref) == summary
    assert cache.get_payload(ref, "another key") is None
    assert peek_summary(TraceCache(None), ref) is None  # caching off


def test_a_file_no_parser_can_start_for_gets_that_error(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    outcomes: list[LoadOutcome] = []
    done = threading.Event()

    def record(outcome: LoadOutcome) -> None:
        outcomes.append(outcome)
        done.set()

    pool = LoadPool(tmp_path, lambda k: None, lambda k, f: None, record, workers=1,
                    config=Settings(parse_processes=1))
    try:
        ref = open_ref(str(sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))[0]))
        pool.submit(LoadJob("key", ref, estimate_memory(ref, CONFIG)))
        assert done.wait(60), "the file stayed queued"
    finally:
        pool.close()
    assert [o.key for o in outcomes] == ["key"] and outcomes[0].table is None
    assert "cannot start a worker process" in outcomes[0].error and "no-python" in outcomes[0].error


def test_pool_and_tables_take_their_budgets_from_the_settings(tmp_path: Path) -> None:
    config = Settings(load_workers=3, load_memory=5 << 30, table_memory=7 << 20,
                      parse_processes=1)
    pool = LoadPool(tmp_path, lambda k: None, lambda k, f: None, lambda o: None, config=config)
    pool.close()
    assert (pool.workers, pool.memory_budget) == (3, 5 << 30)
    assert pool.split == 1  # processes a file parsed alone may use
    assert table_budget(config) == 7 << 20
