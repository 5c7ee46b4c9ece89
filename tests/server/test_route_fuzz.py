"""Issue 32: every route of `tb_plugin/openapi.yaml`, every parameter, hostile values, against a
real TensorBoard serving the samples (and an allocator snapshot): no answer is a 5xx.

The requests are generated, not hand-picked: for each route, a base query that reaches its
payload (valid run, worker, span and required options: the base answers are pinned, so the
mutations start from deep in the route, not from a 404), then each parameter in turn replaced by
values from `HOSTILE` (a seeded choice per route and parameter, so a run is reproducible), then
per route: every parameter hostile at once, each parameter repeated, an unknown parameter, and
no parameter at all. About 2,000 requests; every one must answer below 500 and none may carry
a traceback. The same again on real traces (`needs_shared`): a GPU ResNet-50 and an 8-rank NCCL
run, whose `/ranks` then has 8 ranks to choose from. Without the issue-32 fixes the samples gave
nine 500s, all on `/ranks` (non-numeric `ranks`, `end_us=1e308`).
"""

from __future__ import annotations

import os
import random
import shutil
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from tb_plugin.ingest.interning import MAX_STRING_CHARS
from tb_plugin.views.option_types import MAX_EVENT_ID
from tests.ingest.snapshots import hand_snapshot
from tests.ingest.snapshots import write as write_snapshot
from tests.support import REPO, SAMPLES, SHARED_TRACES, needs_shared
from tests.support.hostile import GOOD_EVENTS
from tests.test_hostile_names import NAMES, padded_name_bomb

from .harness import (
    PLUGIN,
    Reply,
    TensorBoard,
    require_entry_point,
    running_tensorboard,
    write_trace,
)

OPENAPI = REPO / "tb_plugin" / "openapi.yaml"
#: Per parameter, this many values of HOSTILE (seeded per route and parameter).
PER_PARAM = 12
HOSTILE = (
    "", "abc", "-1", "0", "1", "1.5", "-0", "1e308", "-1e308", "1e17", "-1e17", "1e18", "nan",
    "NaN", "inf", "-inf", "Infinity", "0x10", "1_000", " 1", "1 ", "1\n", "9" * 40, "-" + "9" * 40,
    "x" * 5000, "7" * 20000, "\u00fc\u2603\U0001F600", "\u0661\u0662",  # Arabic-Indic digits
    "\ud800", "%00", "\x00", "a\tb", "0,1,2,3,4,5,6,7,8", "0,,1", "0,1,", "1:1e308", "1:nan",
    "0:1,0:2",
    "1:--", "99999999999", "../../../etc/passwd", "/etc/passwd", "..", "run/../x", "*", "[1]",
    "operator_input_shape", "csv", "json", "on", "0-0-0-0-99", "0-", "per_step", str(MAX_EVENT_ID),
    str(MAX_EVENT_ID + 1), "-9223372036854775809", "18446744073709551616", "1e-320", "1e309",
)
#: Values for required options and route-specific parameters of the base query.
REQUIRED = {"edit": "launch=0; op~conv=0.5", "name": "aten::conv2d", "id": "1", "q": "conv",
            "start_us": "0", "end_us": "1e16",
            "view": "Overview", "file": "index.js"}
#: A route whose required parameter takes other values than REQUIRED's.
REQUIRED_BY_ROUTE = {"/whatif/run": {"edit": "straggler=0; transfer=0"}}
SNAPSHOT = "snap"  # cnn_bs32 plus an allocator snapshot


@dataclass(frozen=True)
class Bases:
    """Where the base queries point: a TABLE route's worker span, the PAIR's other side, the
    SPAN routes' run and span, the kernel routes' worker span, the snapshot route's run."""

    table: dict[str, str]
    exp: dict[str, str]
    span: dict[str, str]
    gpu: dict[str, str]
    snapshot_run: str


SAMPLE_BASES = Bases(
    table={"run": "cnn_bs32", "worker": "vm_9710", "span": "1"},
    exp={"exp_run": "cnn_bs64", "exp_worker": "vm_9710", "exp_span": "1"},
    span={"run": "ddp_gloo", "span": "1"},
    # the samples were profiled on a CPU (no kernels): a generated GPU trace, no timestamp
    gpu={"run": "gpu", "worker": "w0", "span": "default"},
    snapshot_run=SNAPSHOT)
#: Routes whose base query does not answer 200, and what it answers instead (and why).
BASE_NOT_200 = {
    "/assets/{file}": 404,  # the bundle is one file (index.js): no asset to name
    "/capture/status": 404,  # no capture was requested: no status under any id
    "/inference": 404,  # the fuzzed runs are training runs: no serving step annotation
}
GPU_ROUTES = ("/kernels", "/kernels/pies")
#: ../shared/traces: a real GPU trace (two spans) and a real 8-rank NCCL run.
SHARED_RUNS = ("resnet50_gpu_pt19", "param_dlrm_8ranks_nccl")
SHARED_BASES = Bases(
    table={"run": "resnet50_gpu_pt19", "worker": "worker0", "span": "1"},
    exp={"exp_run": "resnet50_gpu_pt19", "exp_worker": "worker0", "exp_span": "2"},
    span={"run": "param_dlrm_8ranks_nccl", "span": "default"},
    gpu={"run": "resnet50_gpu_pt19", "worker": "worker0", "span": "1"},
    snapshot_run="resnet50_gpu_pt19")
#: What the shared runs' bases must reach (the others depend on what the real traces hold).
SHARED_BASE_200 = ("/overview", "/operators", "/kernels", "/timeline", "/timeline/search",
                   "/distributed", "/ranks", "/gpu_idle", "/diff")


@pytest.fixture(scope="module")
def fuzz_tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    require_entry_point()
    root = tmp_path_factory.mktemp("fuzz")
    logs = root / "logs"
    for name in ("cnn_bs32", "cnn_bs64", "ddp_gloo"):
        shutil.copytree(SAMPLES / name, logs / name)
    shutil.copytree(SAMPLES / "cnn_bs32", logs / SNAPSHOT)
    write_snapshot(logs / SNAPSHOT / "snapshot.pickle", hand_snapshot())
    write_trace(logs / SAMPLE_BASES.gpu["run"] / "w0.pt.trace.json")
    padded_name_bomb(logs / "names" / "w.pt.trace.json.gz")  # issue 32's gzip, scaled down
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(root / "cache"),
               TORCH_PROF_LOAD_WORKERS="2", PYTHONUNBUFFERED="1")
    with running_tensorboard(logs, root / "tb.log", env) as board:
        board.wait_loaded(timeout=180)
        yield board


@pytest.fixture(scope="module")
def shared_tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    require_entry_point()
    root = tmp_path_factory.mktemp("fuzz-shared")
    for name in SHARED_RUNS:
        shutil.copytree(SHARED_TRACES / name, root / "logs" / name)
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(root / "cache"),
               TORCH_PROF_LOAD_WORKERS="2", PYTHONUNBUFFERED="1")
    with running_tensorboard(root / "logs", root / "tb.log", env) as board:
        board.wait_loaded(timeout=300)
        yield board


def routes() -> dict[str, list[dict[str, Any]]]:
    """GET route -> its parameters (`$ref`s resolved), from openapi.yaml (the one POST route,
    /capture, takes a JSON body: its bad bodies are test_capture_http's)."""
    spec = yaml.safe_load(OPENAPI.read_text())
    shared = spec["components"]["parameters"]

    def resolve(param: dict[str, Any]) -> dict[str, Any]:
        ref = param.get("$ref")
        return shared[ref.rsplit("/", 1)[1]] if ref else param

    return {path: [resolve(p) for p in ops["get"].get("parameters", [])]
            for path, ops in spec["paths"].items() if "get" in ops}


def base_query(route: str, params: list[dict[str, Any]], bases: Bases) -> dict[str, str]:
    names = {p["name"] for p in params if p["in"] == "query"}
    if "exp_run" in names:
        context = {**bases.table, **bases.exp}
    elif route in GPU_ROUTES:
        context = dict(bases.gpu)
    elif route == "/memory/snapshot":
        context = {**bases.table, "run": bases.snapshot_run}
    elif "worker" not in names and "span" in names:
        context = dict(bases.span)
    else:
        context = dict(bases.table)
    query = {k: v for k, v in context.items() if k in names}
    for param in params:
        if param["in"] == "query" and param.get("required") and param["name"] not in query:
            query[param["name"]] = REQUIRED_BY_ROUTE.get(route, REQUIRED)[param["name"]]
    return query


def url_of(tb: TensorBoard, route: str, params: list[dict[str, Any]], query: Any) -> str:
    """`query`: a dict (path parameters taken out of it) or a list of pairs (repeats)."""
    pairs = list(query.items()) if isinstance(query, dict) else list(query)
    path = route
    for param in params:
        if param["in"] == "path":
            value = next((v for k, v in pairs if k == param["name"]), REQUIRED[param["name"]])
            quoted = urllib.parse.quote(value, safe="", errors="surrogatepass")
            path = path.replace(f"{{{param['name']}}}", quoted)
            pairs = [(k, v) for k, v in pairs if k != param["name"]]
    encoded = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote,
                                     errors="surrogatepass")
    return f"{tb.base}/data/plugin/{PLUGIN}{path}" + (f"?{encoded}" if encoded else "")


def mutations(route: str, params: list[dict[str, Any]], base: dict[str, str]
              ) -> Iterator[Any]:
    names = [p["name"] for p in params]
    for name in names:
        for value in random.Random(f"{route}|{name}").sample(HOSTILE, PER_PARAM):
            yield {**base, name: value}
    rng = random.Random(route)
    for _ in range(4):
        yield {name: rng.choice(HOSTILE) for name in names}
    for name in names:
        yield [*base.items(), (name, base.get(name, "1"))]
    yield {**base, "unknown_param": "1", "": "x"}
    yield {}


def server_error(reply: Reply) -> str:
    """Why this reply is wrong ("" when it is fine): a 5xx, or an error that is not the JSON
    envelope with a message, or that carries a traceback."""
    text = reply.body.decode("utf-8", "replace")
    if reply.status >= 500 or "Traceback" in text:
        return f"{reply.status} {reply.url[:300]}: {text[:300]}"
    return ""


def fuzz(tb: TensorBoard, bases: Bases) -> tuple[dict[str, int], dict[int, int]]:
    """Every route's base query and its mutations: (route -> base status, status -> count of
    the mutations); fails listing the 5xx (and tracebacks) if there is any."""
    table = routes()
    assert len(table) >= 25 and "/ranks" in table, sorted(table)
    statuses: dict[str, int] = {}
    failures: list[str] = []
    counts: dict[int, int] = {}
    sent = 0
    for route, params in table.items():
        base = base_query(route, params, bases)
        statuses[route] = tb.fetch(url_of(tb, route, params, base)).status
        for query in mutations(route, params, base):
            reply = tb.fetch(url_of(tb, route, params, query))
            sent += 1
            counts[reply.status] = counts.get(reply.status, 0) + 1
            if why := server_error(reply):
                failures.append(why)
    assert failures == [], f"{len(failures)} of {sent} requests failed:\n" + "\n".join(
        failures[:40])
    assert sum(counts.values()) == sent >= 1500
    # The mutations reached the validators: many hostile values are refused with a 400.
    assert counts.get(400, 0) > sent // 3 and counts.get(200, 0) > 0, counts
    return statuses, counts


def test_every_route_parameter_fuzzed_no_5xx(fuzz_tb: TensorBoard) -> None:
    statuses, _ = fuzz(fuzz_tb, SAMPLE_BASES)
    assert statuses == {route: BASE_NOT_200.get(route, 200) for route in routes()}


def test_server_parser_reads_the_padded_gzip_of_huge_names(fuzz_tb: TensorBoard) -> None:
    """The report's server parser ran out of memory on it ("internal error"): here its parse
    child reads every event and cuts the names, as the CLI does (tests/test_hostile_names.py)."""
    status = fuzz_tb.get("status", {"run": "names", "worker": "w", "span": "default"}).json()
    assert (status["state"], status["events"]) == ("partial", GOOD_EVENTS + NAMES + 1), status
    assert status["messages"] == [f"{NAMES} strings (event names, shapes or call stacks) were "
                                  f"longer than {MAX_STRING_CHARS} characters and were cut to "
                                  "that length"]


@needs_shared
def test_every_route_fuzzed_on_real_gpu_and_8_rank_traces(shared_tb: TensorBoard) -> None:
    statuses, _ = fuzz(shared_tb, SHARED_BASES)
    assert {route: statuses[route] for route in SHARED_BASE_200} == dict.fromkeys(
        SHARED_BASE_200, 200)
