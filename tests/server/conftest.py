"""Fixtures of the server tests (helpers live in harness.py).

The main TensorBoard (`tb`) and its logdir are session-scoped so that test_http.py and
test_views_http.py share one process (starting it and loading ~40 files costs tens of seconds).
No test depends on being its first user: the burst "while loading" has its own fresh server
(`loading_tb` in test_http.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import (
    TIMINGS,
    TensorBoard,
    copy_shared_runs,
    generated_runs,
    require_entry_point,
    running_tensorboard,
    sample_runs,
)

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
    generated_runs(root)
    sample_runs(root)
    return root


@pytest.fixture(scope="session")
def tb(logdir: Path, server_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[TensorBoard]:
    log = tmp_path_factory.mktemp("tb-main") / "tensorboard.log"
    with running_tensorboard(logdir, log, server_env, "--load_fast=true") as board:
        board.wait_loaded(timeout=180)  # every test sees a loaded server, whatever the order
        yield board


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if TIMINGS:
        terminalreporter.write_line(f"server timings: {json.dumps(TIMINGS)}")
