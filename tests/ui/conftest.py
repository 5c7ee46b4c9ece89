"""Fixtures of the browser tests: one real TensorBoard per session on a prepared log dir
(see harness.py), a chromium browser, and pages that record every request they make."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ingest.snapshots import Simulated, evil_pickles, into_trace_period
from tests.ingest.snapshots import write as write_snapshot
from tests.support import REQUIRE_BROWSER_ENV, need
from tests.support.fsdp_trace import write_fsdp_run

from .harness import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    SAMPLE_RUNS,
    SAMPLES,
    SHARED_TRACES,
    RequestLog,
    TensorBoard,
    build_logdir,
    new_page,
    running_tensorboard,
)


@pytest.fixture(scope="session")
def tensorboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    root = tmp_path_factory.mktemp("ui")
    logdir = root / "logs"
    logdir.mkdir()
    runs = build_logdir(logdir)
    with running_tensorboard(root, logdir, runs) as tb:
        yield tb


# -- browser -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    need(os.path.exists(CHROMIUM), f"{CHROMIUM} (apt-get install chromium)", REQUIRE_BROWSER_ENV)
    from playwright.sync_api import sync_playwright  # a test dependency: fail if it is missing

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def requests_log() -> RequestLog:
    return RequestLog()


def _checked_page(browser: Any, theme: str, requests_log: RequestLog) -> Iterator[Any]:
    """A page in `theme` that fails its test on any request outside 127.0.0.1 or page error."""
    context, page, errors = new_page(browser, theme, requests_log)
    yield page
    context.close()
    assert not requests_log.outside(), f"requests outside 127.0.0.1: {requests_log.outside()}"
    assert not errors, f"uncaught page errors: {errors}"


@pytest.fixture
def page(browser: Any, requests_log: RequestLog) -> Iterator[Any]:
    yield from _checked_page(browser, "light", requests_log)


@pytest.fixture
def dark_page(browser: Any, requests_log: RequestLog) -> Iterator[Any]:
    yield from _checked_page(browser, "dark", requests_log)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


# -- Memory, Distributed, Module and Diff views (test_views_*.py) -----------------------------
# Their own TensorBoard: the samples plus the shared traces those views need (NCCL ranks, an
# export-only memory timeline, a GPU trace with device capacity), without the 100k-op run, and
# with this checkout's tb_plugin first on the path (whatever the venv's editable install names).

VIEWS_SHARED_RUNS = ("ddp_2ranks_sampled", "nccl_collectives", "memory_timeline_raw",
                     "resnet50_gpu_pt19", "param_dlrm_8ranks_nccl", "cpu_only", "ns_resolution")


def build_views_logdir(root: Path) -> dict[str, Any]:
    runs: dict[str, Any] = {"samples": [], "shared": []}
    for name in SAMPLE_RUNS:
        src = SAMPLES / name
        if src.is_dir() and any(src.glob("*.pt.trace.json*")):
            shutil.copytree(src, root / name)
            runs["samples"].append(name)
    runs["snapshots"] = build_snapshot_runs(root)
    runs["generated"] = [write_fsdp_run(root / "fsdp_generated").name]  # test_view_ranks_*
    for name in VIEWS_SHARED_RUNS:
        src = SHARED_TRACES / name
        if src.is_dir():
            shutil.copytree(src, root / name)
            runs["shared"].append(name)
    return runs


def build_snapshot_runs(root: Path) -> list[str]:
    """`snapshot_run`: cnn_bs32's traces, a simulated allocator snapshot in the period of its
    first span's trace (named after it) and a malicious pickle (test_view_memory_snapshot.py)."""
    traces = sorted((SAMPLES / "cnn_bs32").glob("*.pt.trace.json.gz"))
    if not traces:
        return []
    run = root / "snapshot_run"
    run.mkdir()
    for trace in traces:
        shutil.copy(trace, run / trace.name)
    name = traces[0].name.replace(".pt.trace.json.gz", ".snapshot.pickle")
    write_snapshot(run / name, into_trace_period(Simulated(11, 600).snapshot(), traces[0]))
    (run / "evil.pickle").write_bytes(evil_pickles(root / "pwned")["reduce-protocol-4"])
    return ["snapshot_run"]


@pytest.fixture(scope="session")
def views_tensorboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorBoard]:
    root = tmp_path_factory.mktemp("ui_views")
    logdir = root / "logs"
    logdir.mkdir()
    runs = build_views_logdir(logdir)
    with running_tensorboard(root, logdir, runs, repo_first=True) as tb:
        yield tb
