"""Every view route of the registry over HTTP in a real TensorBoard, on the CPU convolution
fixtures that broke the FLOPs estimate (tests/support/conv_traces.py), a sample, and the real
PyTorch 1.x/2.x CUDA and ROCm traces of ../shared/traces that carry convolutions, GEMMs and
attention: no 5xx, and every 200 matches its documented schema (the harness checks replies).
The in-process pass over every trace is tests/test_view_corpus.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tb_plugin.views.options import option_fields
from tb_plugin.views.registry import SPECS
from tb_plugin.views.spec import PAIR, SPAN, TABLE
from tests.support import SAMPLES, SHARED_TRACES, import_torch, needs_shared
from tests.support.conv_traces import CONV_CASES, record_conv_traces

from .harness import TensorBoard, running_tensorboard

SHARED_RUNS = ("resnet50_gpu_pt19", "amd_mi250_rocm", "tl_mi300_torch_compile_triton",
               "tl_h100_qwen_mem_modules", "alexnet_gpu")
OPTIONS: dict[str, dict[str, Any]] = {
    "operator_stack": {"name": "aten::conv2d"}, "timeline_event": {"event_id": 0},
    "timeline_search": {"query": "conv"}, "timeline_range": {"start_us": 0, "end_us": 1e12},
    "whatif": {"edit": "launch=0; sync=0; op~conv=0.5"},
    "whatif_run": {"edit": "straggler=0; transfer=0"}}
SKIPPED_VIEWS = frozenset(("memory_timeline", "memory_snapshot"))  # read no trace


@pytest.fixture(scope="module")
def corpus_tb(tmp_path_factory: pytest.TempPathFactory, server_env: dict[str, str]
              ) -> Iterator[TensorBoard]:
    root = tmp_path_factory.mktemp("corpus")
    for name, path in record_conv_traces(import_torch(), root / "recorded").items():
        target = root / "logdir" / name
        target.mkdir(parents=True)
        shutil.copy2(path, target / "w.pt.trace.json")
    shutil.copytree(SAMPLES / "cnn_bs32", root / "logdir" / "cnn_bs32")
    for run in SHARED_RUNS if SHARED_TRACES.is_dir() else ():
        shutil.copytree(SHARED_TRACES / run, root / "logdir" / run)
    log = tmp_path_factory.mktemp("tb-corpus") / "tensorboard.log"
    with running_tensorboard(root / "logdir", log, server_env, "--load_fast=true") as board:
        board.wait_loaded(timeout=300)
        yield board


def _params(spec: Any) -> dict[str, Any]:
    names = {field.attr: field.param for field in option_fields(spec.options)}
    return {names[attr]: value for attr, value in OPTIONS.get(spec.name, {}).items()}


def _answer(tb: TensorBoard, route: str, params: dict[str, Any]) -> int:
    """The status of a route once it is no longer 202 (still parsing); a 200 is schema-checked."""
    def settled() -> Any:
        reply = tb.get(route.lstrip("/"), params, timeout=120)
        return reply if reply.status != 202 else None

    reply = tb.wait_for(f"{route} to stop answering 202", settled, timeout=300)
    if reply.status == 200 and reply.header("content-type").startswith("application/json"):
        reply.json()
    return reply.status


def _every_route(tb: TensorBoard, run: str) -> dict[str, int]:
    """Route (and worker) -> status, over every view of `run`'s first span of each worker."""
    statuses = {}
    listing = {r["name"]: r for r in tb.runs()["runs"]}[run]
    for worker in [w["name"] for w in listing["workers"]]:
        span = tb.get("spans", {"run": run, "worker": worker}).json()[0]
        side = {"run": run, "worker": worker, "span": span}
        for name, spec in SPECS.items():
            if name in SKIPPED_VIEWS:
                continue
            if spec.kind == TABLE:
                params = {**side, **_params(spec)}
            elif spec.kind == PAIR:
                params = {**side, "exp_run": run, "exp_worker": worker, "exp_span": span}
            else:
                assert spec.kind == SPAN, name
                params = {"run": run, "span": span, **_params(spec)}
            statuses[f"{worker} {spec.route}"] = _answer(tb, spec.route, params)
    return statuses


@pytest.mark.parametrize("run", [*sorted(CONV_CASES), "cnn_bs32"])
def test_no_view_answers_5xx_on_the_conv_fixtures(corpus_tb: TensorBoard, run: str) -> None:
    statuses = _every_route(corpus_tb, run)
    assert {k: v for k, v in statuses.items() if v >= 500} == {}
    assert all(v == 200 for k, v in statuses.items() if k.endswith(("/overview", "/roofline",
                                                                     "/gpu_idle")))


@needs_shared
@pytest.mark.parametrize("run", SHARED_RUNS)
def test_no_view_answers_5xx_on_real_traces(corpus_tb: TensorBoard, run: str) -> None:
    statuses = _every_route(corpus_tb, run)
    assert {k: v for k, v in statuses.items() if v >= 500} == {}
    assert all(v == 200 for k, v in statuses.items() if k.endswith(("/overview", "/roofline",
                                                                     "/gpu_idle")))
