"""Fixtures of the server tests (helpers live in harness.py).

The main TensorBoard (`tb`) and its logdir are session-scoped so that test_http.py and
test_views_http.py share one process (starting it and loading ~40 files costs tens of seconds).
test_http.py runs first (file order) and fires its burst while the runs load.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import (
    OLD,
    SAMPLES,
    TIMINGS,
    TensorBoard,
    copy_shared_runs,
    make_trace,
    require_entry_point,
    start_tensorboard,
    truncated_gzip,
    write_bytes,
    write_trace,
)

#: Sample runs copied into the main logdir (see samples/README.md).
SAMPLE_RUNS = ("cnn_bs32", "cnn_bs64", "ddp_gloo")

# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def server_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    require_entry_point()
    env = dict(os.environ)
    env["TORCH_PROF_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    env["TORCH_PROF_LOAD_WORKERS"] = "2"
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="session")
def shared_runs(logdir: Path) -> list[str]:
    return sorted(p.name for p in logdir.iterdir() if (p / ".shared").exists())


@pytest.fixture(scope="session")
def logdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("logdir")
    for name in copy_shared_runs(root):
        (root / name / ".shared").touch()
    _generated_runs(root)
    _sample_runs(root)
    return root


def _generated_runs(root: Path) -> None:
    gpu = root / "gen_gpu"
    write_trace(gpu / "w0.1700000000001.pt.trace.json", steps=3, mtime=OLD)
    write_trace(gpu / "w0.1700000000002.pt.trace.json.gz", steps=4, mtime=OLD)
    write_trace(gpu / "w0.1700000000010.pt.trace.json", steps=2, mtime=OLD)
    write_trace(gpu / "w1.pt.trace.json", steps=2, mtime=OLD)
    for i in range(1, 11):  # spans 1..10 must come back in numeric order
        write_trace(gpu / f"w2.{1700000000000 + i}.pt.trace.json", steps=1, ops_per_step=1,
                    mtime=OLD)
    write_trace(root / "gen_cpu" / "cpu.pt.trace.json", kernels=False, mtime=OLD)
    write_trace(root / "gen_big" / "big.pt.trace.json", steps=250, ops_per_step=100, mtime=OLD)
    mixed = root / "mixed"
    write_trace(mixed / "good.pt.trace.json", mtime=OLD)
    write_bytes(mixed / "trunc.pt.trace.json.gz", truncated_gzip(make_trace(steps=40), 0.6))
    write_bytes(mixed / "badjson.pt.trace.json", b"this is { not json")
    write_bytes(mixed / "empty.pt.trace.json", b"")
    write_trace(root / "nested" / "deep run \u00fc" / "w.pt.trace.json", mtime=OLD)


def _sample_runs(root: Path) -> None:
    """samples/ runs, plus two variants: `ddp_broken` (ddp_gloo's rank 0, and a rank 2 whose
    only file is broken) and `export_only` (one memory-timeline export, no trace)."""
    for name in SAMPLE_RUNS:
        _copy(SAMPLES / name, root / name)
    broken = root / "ddp_broken"
    for path in sorted((SAMPLES / "ddp_gloo").glob("*rank0*")):
        _copy(path, broken / path.name)
    write_bytes(broken / "vm_9999_rank2.1795260318969.pt.trace.json.gz", b"\x1f\x8b broken")
    export = sorted((SAMPLES / "cnn_bs32").glob("*.raw.json.gz"))[0]
    _copy(export, root / "export_only" / "memory.raw.json.gz")


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, copy_function=shutil.copy2)
        for path in target.rglob("*"):
            path.chmod(0o644 if path.is_file() else 0o755)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    target.chmod(0o644)


@pytest.fixture(scope="session")
def tb(logdir: Path, server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[TensorBoard]:
    log = tmp_path_factory.mktemp("tb-main") / "tensorboard.log"
    board = start_tensorboard(logdir, log, server_env, "--load_fast=true")
    yield board
    TIMINGS["main_stop_s"] = round(board.stop(), 2)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.write_line(f"server timings: {json.dumps(TIMINGS)}")
