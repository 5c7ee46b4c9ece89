"""End-to-end tests of the plugin's HTTP API, against real TensorBoard processes.

One TensorBoard per configuration: the main one (`--load_fast=true`, the session fixture `tb` in
conftest.py, also used by test_views_http.py) on copies of ../shared/traces and samples/ plus
generated traces and broken files; a fresh one whose logdir holds a file that takes minutes (a
gzip bomb with the inflation limit raised), so its burst always meets runs that are loading and
a live parser process; one under `--path_prefix=/x/y`; one with `--load_fast=false`, `--logdir_spec`
and the cache disabled.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Optional

import pytest

from tb_plugin.workers import WORKER_NAME
from tests.support import need
from tests.support.hostile import whitespace_bomb

from .harness import (
    OLD,
    TIMINGS,
    TensorBoard,
    assert_error,
    generated_runs,
    make_trace,
    running_tensorboard,
    sample_runs,
    start_tensorboard,
    write_bytes,
    write_trace,
)

REPO = Path(__file__).resolve().parents[2]
STATIC_INDEX = REPO / "tb_plugin" / "static" / "index.js"
GPU = {"run": "gen_gpu", "worker": "w0", "span": "1"}
BIG = {"run": "gen_big", "worker": "big", "span": "default"}
CPU = {"run": "gen_cpu", "worker": "cpu", "span": "default"}
CNN = {"run": "cnn_bs32", "worker": "vm_9710", "span": "1"}
TABLE_ROUTES = ["overview", "operators", "operators/pies", "kernels", "kernels/pies"]
#: Generated traces have no memory, communication or module events; Diff: the logdir has 2+ runs.
GPU_VIEWS = ["Overview", "Operator", "Kernel", "Trace", "Module", "Diff", "GPU Idle"]
CPU_VIEWS = ["Overview", "Operator", "Trace", "Module", "Diff", "GPU Idle"]
STALLED = {"run": "stalled", "worker": "w", "span": "default"}
HAS_PROC = Path("/proc/self/stat").exists()
needs_proc = pytest.mark.usefixtures("_proc")


@pytest.fixture
def _proc() -> None:
    """These tests count processes through /proc (Linux): a failure in CI where it is absent."""
    need(HAS_PROC, "/proc (Linux)")


# The main server (`tb`) and its logdir are session fixtures in conftest.py, shared with
# test_views_http.py.


def _descendants(pid: int) -> list[int]:
    """All descendant pids of pid (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def parser_processes(pid: int) -> list[int]:
    """Descendants of TensorBoard that are parser processes (workers and their split-parse
    helpers, which are forked from a worker and keep its command line)."""
    found = []
    for child in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if WORKER_NAME.encode() in cmdline.split(b"\0"):
            found.append(child)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


class Sampler(threading.Thread):
    """Counts TensorBoard's parser processes every 50 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak = pid, 0
        self.seen: list[str] = []  # command lines at the peak, for the failure message
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            found = parser_processes(self.pid)
            if len(found) > self.peak:
                self.peak, self.seen = len(found), [_cmdline(p) for p in found]
            self.stopped.wait(0.05)


def find_run(listing: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in listing["runs"] if r["name"] == name)


def span_states(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{w['name']}/{s['span']}": s for w in run["workers"] for s in w["spans"]}


# -- main server: loading -----------------------------------------------------------------------


@pytest.fixture
def loading_tb(server_env: dict[str, str], tmp_path: Path) -> Iterator[TensorBoard]:
    """A fresh server on the generated and sample runs plus `stalled`, whose only file is a
    gzip bomb the inflation limit is raised for (40 GB of whitespace inside the events array:
    minutes of parsing): until the fixture ends, that run is loading and one parser process is
    busy with it. (A FIFO used to play this part; FIFOs are now skipped, issue 19.)"""
    logdir = tmp_path / "logdir"
    generated_runs(logdir)
    sample_runs(logdir)
    whitespace_bomb(logdir / "stalled" / "w.pt.trace.json.gz", inflated_gb=40)
    env = {**server_env, "TORCH_PROF_MAX_INFLATE_RATIO": "1000000"}
    with running_tensorboard(logdir, tmp_path / "tb.log", env, "--load_fast=true") as board:
        yield board


@needs_proc
def test_concurrent_requests_while_loading(loading_tb: TensorBoard) -> None:
    """60 simultaneous requests right after start get data or 202, never an error; the stalled
    run answers 202; the number of parser processes stays within the configured bound (2)
    although 25+ files are queued, and the parser blocked on the FIFO is one of them."""
    tb = loading_tb
    requests: list[tuple[str, Optional[dict[str, Any]]]] = [
        ("runs", None), ("views", {"run": "gen_big"}), ("spans", {"run": "gen_big", "worker":
                                                               "big"}),
        ("workers", {"run": "gen_big", "view": "Overview"}), ("status", BIG),
        ("overview", BIG), ("operators", BIG), ("kernels", BIG), ("kernels/pies", BIG),
        ("operators/pies", BIG), ("overview", GPU), ("operators", {**GPU, "format": "csv"}),
        ("timeline", BIG), ("timeline", CNN), ("memory", CNN), ("modules", CNN),
        ("memory/timeline", CNN), ("distributed", {"run": "ddp_gloo", "span": "1"}),
        ("diff", {**CNN, "exp_run": "cnn_bs64", "exp_worker": "vm_9710", "exp_span": "1"}),
        ("overview", STALLED),
    ]
    sampler = Sampler(tb.process.pid)
    sampler.start()
    barrier = threading.Barrier(60)

    def one(i: int) -> Any:
        route, params = requests[i % len(requests)]
        barrier.wait(30)
        return tb.get(route, params)

    with ThreadPoolExecutor(60) as pool:
        replies = list(pool.map(one, range(60)))
    statuses = Counter(r.status for r in replies)
    assert set(statuses) <= {200, 202}, [(r.url, r.status, r.body[:200]) for r in replies
                                           if r.status not in (200, 202)]
    stalled = [r for r in replies if "run=stalled" in r.url]
    assert len(stalled) == 3 and {r.status for r in stalled} == {202}, stalled
    assert all(r.json()["loading"] is True for r in replies if r.url.endswith("/runs"))
    for reply in (r for r in replies if r.status == 202):
        body = reply.json()
        assert body["loading"] is True and 0 <= body["progress"] <= 1, body
        assert reply.header("retry-after") == "1"

    # Everything but the stalled file finishes; that one keeps its parser process busy.
    tb.wait_for("every run but `stalled` to load", lambda: _only_stalled_loading(tb.runs()),
                timeout=150, interval=0.25)
    blocked = parser_processes(tb.process.pid)
    sampler.stopped.set()
    sampler.join()
    assert blocked, "no parser process while a file is being parsed"
    peak = max(sampler.peak, len(blocked))
    assert peak <= 2, f"peak parser processes: {peak} {sampler.seen or blocked}"
    assert tb.get("overview", STALLED).status == 202

    # Once loaded, a second burst on one payload: all 200 and byte-identical (computed once).
    with ThreadPoolExecutor(50) as pool:
        again = list(pool.map(lambda _: tb.get("overview", BIG), range(50)))
    assert {r.status for r in again} == {200}
    assert len({r.body for r in again}) == 1


def _only_stalled_loading(listing: dict[str, Any]) -> bool:
    """True when the listing is still loading, and only because of the stalled run."""
    loading = {f"{run['name']}/{key}" for run in listing["runs"]
               for key, span in span_states(run).items() if span["state"] == "loading"}
    return listing["loading"] and loading == {"stalled/w/default"}


def test_runs_listing(tb: TensorBoard, logdir: Path, shared_runs: list[str]) -> None:
    listing = tb.wait_loaded()
    names = [r["name"] for r in listing["runs"]]
    assert names == sorted(names)
    assert {"gen_gpu", "gen_cpu", "gen_big", "mixed", "nested/deep run \u00fc", *shared_runs
            } <= set(names)
    assert listing["logdir"] == str(logdir) and listing["loading"] is False
    for run in listing["runs"]:
        assert set(run) == {"name", "state", "progress", "views", "workers"}
        assert run["progress"] == 1
        for worker in run["workers"]:
            assert set(worker) == {"name", "spans"}
            for span in worker["spans"]:
                assert set(span) == {"span", "state", "messages", "events", "memory_timeline"}
                assert isinstance(span["memory_timeline"], bool)

    gpu = find_run(listing, "gen_gpu")
    assert gpu["state"] == "ready"
    assert gpu["views"] == GPU_VIEWS
    assert [w["name"] for w in gpu["workers"]] == ["w0", "w1", "w2"]
    assert find_run(listing, "gen_cpu")["views"] == CPU_VIEWS

    mixed = find_run(listing, "mixed")
    states = span_states(mixed)
    assert mixed["state"] == "partial"
    assert states["good/default"]["state"] == "ok"
    assert states["good/default"]["events"] > 0
    assert states["trunc/default"]["state"] == "truncated"
    assert states["trunc/default"]["messages"]
    for broken in ("badjson/default", "empty/default"):
        assert states[broken]["state"] == "error", states[broken]
        assert states[broken]["messages"] and states[broken]["events"] is None
    assert mixed["views"] == GPU_VIEWS

    for name in shared_runs:  # every real trace loads (memory_timeline_raw has no worker)
        run = find_run(listing, name)
        assert run["state"] in ("ready", "partial"), run
        for key, span in span_states(run).items():
            assert span["state"] in ("ok", "partial"), (name, key, span)


def test_views_workers_spans(tb: TensorBoard, shared_runs: list[str]) -> None:
    assert tb.get("views", {"run": "gen_gpu"}).json() == GPU_VIEWS
    assert tb.get("views", {"run": "gen_cpu"}).json() == CPU_VIEWS
    assert tb.get("workers", {"run": "gen_gpu", "view": "Kernel"}).json() == ["w0", "w1", "w2"]
    assert tb.get("workers", {"run": "gen_cpu", "view": "Kernel"}).json() == []
    assert tb.get("workers", {"run": "mixed", "view": "Overview"}).json() == ["good", "trunc"]
    assert tb.get("spans", {"run": "gen_gpu", "worker": "w0"}).json() == ["1", "2", "3"]
    assert tb.get("spans", {"run": "gen_gpu", "worker": "w1"}).json() == ["default"]
    assert tb.get("spans", {"run": "gen_gpu", "worker": "w2"}).json() == [
        str(i) for i in range(1, 11)]
    nested = {"run": "nested/deep run \u00fc"}
    assert tb.get("workers", {**nested, "view": "Overview"}).json() == ["w"]


def test_spans_of_a_shared_trace(tb: TensorBoard, shared_runs: list[str]) -> None:
    need("resnet50_gpu_pt19" in shared_runs, "../shared/traces/resnet50_gpu_pt19")
    assert tb.get("spans", {"run": "resnet50_gpu_pt19", "worker": "worker0"}).json() == ["1", "2"]


def test_data_routes_json_and_csv(tb: TensorBoard) -> None:
    overview = tb.get("overview", GPU)
    assert overview.status == 200 and isinstance(overview.json(), dict)
    assert overview.header("content-type").startswith("application/json")
    for group in ("operator", "operator_input_shape"):
        rows = tb.get("operators", {**GPU, "group_by": group}).json()["rows"]
        assert "aten::conv2d" in {r["name"] for r in rows}
    pies = tb.get("operators/pies", {**GPU, "group_by": "operator", "top_n": 2})
    assert pies.status == 200 and isinstance(pies.json(), dict)
    stack = tb.get("operators/stack", {**GPU, "name": "aten::conv2d"})
    assert stack.status == 200, stack.body
    for group in ("kernel", "kernel_op_launch"):
        rows = tb.get("kernels", {**GPU, "group_by": group}).json()["rows"]
        assert "aten::conv2d_kernel" in {r["name"] for r in rows}
    assert tb.get("kernels/pies", {**GPU, "top_n": 3}).status == 200
    assert tb.get("overview", BIG).status == 200

    for route in TABLE_ROUTES + ["operators/stack"]:
        params = {**GPU, "format": "csv"}
        if route == "operators/stack":
            params["name"] = "aten::relu"
        reply = tb.get(route, params)
        assert reply.status == 200, (route, reply.body[:300])
        assert reply.header("content-type").startswith("text/csv"), reply.headers
        disposition = reply.header("content-disposition")
        assert disposition.startswith("attachment; filename=") and disposition.endswith('.csv"')
        table = list(csv.reader(io.StringIO(reply.body.decode("utf-8"))))
        assert len(table) >= 2 and table[0], (route, table[:3])

    operators_csv = list(csv.DictReader(io.StringIO(tb.get(
        "operators", {**GPU, "format": "csv"}).body.decode())))
    assert "aten::conv2d" in {row["name"] for row in operators_csv}


def test_every_shared_trace_serves_its_views(tb: TensorBoard, shared_runs: list[str]) -> None:
    for name in shared_runs:
        views = tb.get("views", {"run": name}).json()
        for view, routes in (("Overview", ["overview"]), ("Operator", ["operators"]),
                             ("Kernel", ["kernels", "kernels/pies"])):
            if view not in views:
                continue
            for worker in tb.get("workers", {"run": name, "view": view}).json():
                for span in tb.get("spans", {"run": name, "worker": worker}).json():
                    for route in routes:
                        reply = tb.get(route, {"run": name, "worker": worker, "span": span})
                        assert reply.status == 200, (name, worker, span, route, reply.body)


def test_status_route(tb: TensorBoard) -> None:
    ok = tb.get("status", GPU).json()
    assert ok["state"] == "ok" and ok["events"] > 0 and ok["progress"] == 1
    broken = tb.get("status", {"run": "mixed", "worker": "empty", "span": "default"})
    assert broken.status == 200 and broken.json()["state"] == "error"
    assert broken.json()["messages"]


# -- main server: errors and safety ---------------------------------------------------------------


def test_bad_parameters_are_400(tb: TensorBoard) -> None:
    bad = [
        ("views", {}), ("workers", {"run": "gen_gpu"}), ("spans", {"run": "gen_gpu"}),
        ("status", {"run": "gen_gpu", "worker": "w0"}),
        ("workers", {"run": "gen_gpu", "view": "Bogus"}),
        ("overview", {"run": "gen_gpu", "worker": "w0"}),
        ("overview", {**GPU, "run": ""}),
        ("operators", {**GPU, "group_by": "bogus"}),
        ("kernels", {**GPU, "group_by": "operator"}),
        ("operators", {**GPU, "format": "xml"}),
        ("operators/stack", GPU),
        ("operators/stack", {**GPU, "name": "aten::relu", "input_shape": "[[2, 3], [3]]"}),
        ("views", {"run": ["gen_gpu", "gen_cpu"]}),
        ("views", {"run": "gen\x00gpu"}),
        ("views", {"run": "x" * 5000}),
    ]
    bad += [("operators/pies", {**GPU, "top_n": n}) for n in ("0", "-1", "abc", "1e3", "\u00b2",
                                                             "99999999999")]
    bad += [("kernels/pies", {**GPU, "top_n": "0"})]
    for route, params in bad:
        assert_error(tb.get(route, params), 400)


def test_unknown_names_are_404(tb: TensorBoard) -> None:
    for route, params in [
        ("views", {"run": "nope"}), ("workers", {"run": "nope", "view": "Overview"}),
        ("spans", {"run": "gen_gpu", "worker": "nope"}),
        ("overview", {**GPU, "run": "nope"}), ("overview", {**GPU, "worker": "nope"}),
        ("overview", {**GPU, "span": "9"}), ("status", {**GPU, "span": "default"}),
        ("kernels", CPU), ("kernels/pies", CPU),
        ("operators/stack", {**GPU, "name": "aten::does_not_exist"}),
    ]:
        assert_error(tb.get(route, params), 404)
    assert_error(tb.get("assets/nope.js"), 404)
    for route in ("nope", "runs/extra", "index.js/x", "operators/nope", "data"):
        assert_error(tb.get(route), 404)


def test_broken_worker_is_422_and_others_still_work(tb: TensorBoard) -> None:
    for worker in ("empty", "badjson"):
        error = assert_error(tb.get("overview", {"run": "mixed", "worker": worker,
                                                 "span": "default"}), 422)
        assert error["messages"] and all(isinstance(m, str) for m in error["messages"])
    good = {"run": "mixed", "worker": "good", "span": "default"}
    assert tb.get("overview", good).status == 200
    truncated = {"run": "mixed", "worker": "trunc", "span": "default"}
    assert tb.get("operators", truncated).status == 200


def test_path_traversal_is_refused(tb: TensorBoard, logdir: Path) -> None:
    for run in ("../gen_gpu", "gen_gpu/..", "gen_gpu/../gen_gpu", "/etc", str(logdir / "gen_gpu"),
                "..%2Fgen_gpu", "%2e%2e", "nested/../gen_gpu", "./gen_gpu"):
        assert_error(tb.get("views", {"run": run}), 404)
    for worker in ("../w0", "w0/../w0", "/w0", "w0.1700000000001.pt.trace.json"):
        assert_error(tb.get("spans", {"run": "gen_gpu", "worker": worker}), 404)
    for span in ("../1", "1/..", "1700000000001"):
        assert_error(tb.get("overview", {**GPU, "span": span}), 404)
    secret = (REPO / "setup.py").read_bytes()
    prefix = "/data/plugin/torch_prof/"
    for path in ("assets/../../../setup.py", "assets/..%2f..%2f..%2fsetup.py",
                 "assets/%2e%2e/%2e%2e/%2e%2e/setup.py", "assets//etc/passwd",
                 "assets/%2Fetc%2Fpasswd", "assets/", "assets/..", "assets/../index.js",
                 "index.js/../../../../setup.py", "assets/../server/plugin.py",
                 "assets/..\\..\\..\\setup.py"):
        reply = tb.raw(prefix + path)
        assert reply.status in (400, 404), (path, reply.status)
        assert secret not in reply.body and b"root:" not in reply.body


def test_method_not_allowed(tb: TensorBoard) -> None:
    assert_error(tb.fetch(tb.plugin_url("runs"), method="POST"), 405)


def test_static_index(tb: TensorBoard) -> None:
    """The committed bundle (tb_plugin/static/index.js) is served as is."""
    reply = tb.get("index.js")
    assert reply.status == 200
    assert reply.header("content-type").startswith("application/javascript")
    assert reply.body == STATIC_INDEX.read_bytes()
    head = tb.fetch(tb.plugin_url("index.js"), method="HEAD")
    assert head.status == reply.status and head.body == b""


# -- main server: the logdir changes while it runs ----------------------------------------------


def test_new_runs_and_files_appear_after_rescan(tb: TensorBoard, logdir: Path) -> None:
    before = tb.get("status", CPU).json()["events"]
    write_trace(logdir / "gen_gpu" / "w9.pt.trace.json", steps=2, mtime=OLD)
    write_trace(logdir / "gen_new" / "x.1700000000000.pt.trace.json", steps=2, mtime=OLD)
    write_trace(logdir / "gen_cpu" / "cpu.pt.trace.json", kernels=False, steps=9, mtime=OLD)

    def appeared() -> bool:
        listing = tb.runs()
        names = {r["name"] for r in listing["runs"]}
        gpu = find_run(listing, "gen_gpu")
        return "gen_new" in names and "w9" in {w["name"] for w in gpu["workers"]}

    tb.wait_for("the new run and worker", appeared, timeout=40, interval=0.5)
    tb.wait_for("the new files to load", lambda: not tb.runs()["loading"], timeout=60)
    assert tb.get("overview", {"run": "gen_new", "worker": "x", "span": "1"}).status == 200
    assert tb.get("overview", {"run": "gen_gpu", "worker": "w9", "span": "default"}).status == 200
    after = tb.wait_for("the rewritten file to be re-read",
                        lambda: tb.get("status", CPU).json()["events"] != before and
                        tb.get("status", CPU).json(), timeout=40, interval=0.5)
    assert after["state"] == "ok" and after["events"] > before


def test_file_being_written_is_not_reported_broken(tb: TensorBoard, logdir: Path) -> None:
    path = logdir / "writing" / "w.pt.trace.json.gz"
    data = gzip.compress(json.dumps(make_trace(steps=20)).encode(), 6)
    cut = len(data) // 20
    write_bytes(path, data[:cut], mtime=None)  # the writer has flushed its first bytes only
    params = {"run": "writing", "worker": "w", "span": "default"}

    def parsed() -> Optional[dict[str, Any]]:
        listing = tb.runs()
        if "writing" not in {r["name"] for r in listing["runs"]}:
            return None
        status = tb.get("status", params).json()
        return status if status["progress"] == 1 else None

    status = tb.wait_for("the partial file to be parsed", parsed, timeout=40, interval=0.5)
    assert status["state"] in ("loading", "truncated"), status  # never "error" while written
    assert status["messages"][0].startswith("the file was modified"), status
    assert "read again when it changes" in status["messages"][0], status
    assert tb.get("overview", params).status in (200, 202)

    with open(path, "ab") as handle:  # the writer appends the rest: new size -> read again
        handle.write(data[cut:])
    done = tb.wait_for("the finished file", lambda: tb.get("status", params).json()["state"]
                       == "ok", timeout=40, interval=0.5)
    assert done
    assert tb.get("overview", params).status == 200


def test_server_memory_stays_bounded(tb: TensorBoard) -> None:
    """Every file was parsed in child processes and many payloads were served: the server
    process itself holds only summaries, a bounded table LRU and encoded bodies."""
    need(HAS_PROC, "/proc (Linux)")
    status = Path(f"/proc/{tb.process.pid}/status").read_text()
    rss_mb = int(next(line for line in status.splitlines() if line.startswith("VmRSS:")
                      ).split()[1]) >> 10
    TIMINGS["main_server_rss_mb"] = rss_mb
    assert rss_mb < 1024, rss_mb


def test_every_reply_is_hardened(tb: TensorBoard) -> None:
    """nosniff on every reply (data, CSV, static, errors: these and all seen so far), CSP on
    any HTML."""
    own = [tb.get("overview", GPU), tb.get("operators", {**GPU, "format": "csv"}),
           tb.get("index.js"), tb.get("nope"), tb.get("views", {}), tb.get("views", {"run": "x"}),
           tb.fetch(tb.plugin_url("runs"), method="POST")]
    assert [r.status for r in own] == [200, 200, 200, 404,
                                       400, 404, 405]
    for reply in tb.replies:
        assert reply.header("x-content-type-options") == "nosniff", reply.url
        if reply.header("content-type").startswith("text/html"):
            assert "script-src" in reply.header("content-security-policy"), reply.url


# -- other configurations -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    write_trace(root / "small" / "w0.1700000000001.pt.trace.json", mtime=OLD)
    write_trace(root / "small" / "w1.pt.trace.json.gz", kernels=False, mtime=OLD)
    return root


def test_path_prefix(small_logdir: Path, server_env: dict[str, str],
                     tmp_path: Path) -> None:
    env = {**server_env, "TORCH_PROF_TABLE_MEMORY_MB": "1"}  # evict tables all the time
    board = start_tensorboard(small_logdir, tmp_path / "tb.log", env,
                              "--path_prefix=/x/y", "--load_fast=true")
    try:
        assert board.base.endswith("/x/y"), board.base
        plugins = board.fetch(board.base + "/data/plugins_listing").json()
        assert plugins["torch_prof"]["enabled"] is True
        assert plugins["torch_prof"]["tab_name"] == "PyTorch Profiler"
        assert plugins["torch_prof"]["loading_mechanism"]["module_path"].endswith(
            "/data/plugin/torch_prof/index.js")
        listing = board.wait_loaded(timeout=60)
        assert [r["name"] for r in listing["runs"]] == ["small"]
        params = {"run": "small", "worker": "w0", "span": "1"}
        for route in TABLE_ROUTES:  # tables come back from the disk cache after eviction
            assert board.get(route, params).status == 200, route
            assert board.get(route, {**params, "format": "csv"}).status == 200, route
        w1 = {"run": "small", "worker": "w1", "span": "default"}
        assert board.get("operators", w1).status == 200
        assert board.get("operators", {**params, "group_by": "operator_input_shape"}).json()
        assert board.get("index.js").status == 200
        unprefixed = board.base[: -len("/x/y")] + "/data/plugin/torch_prof/runs"
        assert board.fetch(unprefixed).status == 404
        assert all(r.header("x-content-type-options") == "nosniff" for r in board.replies)
    finally:
        board.stop()


@needs_proc
def test_legacy_loader_logdir_spec_no_cache_and_sigterm_exit(
        small_logdir: Path, server_env: dict[str, str], tmp_path: Path) -> None:
    """--load_fast=false with --logdir_spec (first entry used) and TORCH_PROF_CACHE_DIR=off:
    a private temp cache is used and removed at exit, and SIGTERM ends TensorBoard and its
    parser processes although a parser is busy with a file that takes minutes (a gzip bomb the
    inflation limit is raised for)."""
    other = tmp_path / "other"
    write_trace(other / "ignored" / "w.pt.trace.json", mtime=OLD)
    slow_dir = tmp_path / "with-slow-file"
    shutil.copytree(small_logdir, slow_dir)
    whitespace_bomb(slow_dir / "small" / "stalled.pt.trace.json.gz", inflated_gb=40)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**server_env, "TORCH_PROF_CACHE_DIR": "off", "TMPDIR": str(temp),
           "TORCH_PROF_MAX_INFLATE_RATIO": "1000000"}
    board = start_tensorboard(None, tmp_path / "tb.log", env, "--load_fast=false",
                              f"--logdir_spec=main:{slow_dir},other:{other}")
    try:
        params = {"run": "small", "worker": "w0", "span": "1"}
        board.wait_for("the small run", lambda: board.get("overview", params).status == 200,
                       timeout=60, interval=0.25)
        listing = board.runs()
        assert [r["name"] for r in listing["runs"]] == ["small"]
        assert listing["logdir"] == str(slow_dir)
        stalled = {"run": "small", "worker": "stalled", "span": "default"}
        board.wait_for("the parser to work on the slow file", lambda: board.get(
            "status", stalled).json()["state"] == "loading", timeout=30)
        assert board.get("overview", stalled).status == 202
        caches = list(temp.glob("torch-prof-cache-*"))
        assert len(caches) == 1 and any(caches[0].rglob("manifest.json")), caches
        parsers = board.wait_for("a parser process", lambda: parser_processes(
            board.process.pid), timeout=30)
    finally:
        # Raises if TensorBoard ignores SIGTERM (a hang guard, not a speed check).
        exit_s = board.stop(timeout=60)
    TIMINGS["sigterm_exit_with_blocked_parser_s"] = round(exit_s, 2)
    assert board.process.returncode is not None
    assert not list(temp.glob("torch-prof-cache-*")), "the private cache was not removed"
    _wait_gone(parsers)


def _wait_gone(pids: list[int], timeout: float = 30) -> None:
    """Every pid exits (or is a zombie awaiting its reaper): no orphan parser processes."""
    deadline = time.monotonic() + timeout
    alive = pids
    while alive:
        assert time.monotonic() < deadline, f"parser processes outlived TensorBoard: {alive}"
        time.sleep(0.1)  # polling process state, not synchronising on time
        alive = [pid for pid in alive if Path(f"/proc/{pid}").exists() and not _zombie(pid)]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True
