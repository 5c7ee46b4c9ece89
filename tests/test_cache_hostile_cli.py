"""Issue 32 through the CLI, a real process: a shared cache (file://) whose commit markers were
replaced after a first run (a depth bomb, a FIFO, a symlink to /dev/zero, a 1 TB sparse file).
Before the fix the depth bomb crashed `report` with a RecursionError traceback, /dev/zero read
until MemoryError and the FIFO hung it. Now each marker is ignored, that file parsed again, and
the CLI answers what it answers without a cache, in bounded memory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tb_plugin.cache_fs import MARKER
from tests.cluster.ranks import write_run
from tests.support.hostile import deep, run_cli

MB = 1 << 20
BASE_BOUND = 400 * MB  # as tests/test_hostile_cli.py: the interpreter and a chunk, generous


WORKERS = 4


def _cli(*args: str) -> str:
    run = run_cli(*args, env={"TORCH_PROF_PARSE_PROCESSES": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.peak_rss < BASE_BOUND, run.peak_rss
    return run.stdout


def _report(logs: Path, worker: str, *cache: str) -> Any:
    return json.loads(_cli(*cache, "report", str(logs), "--run", "job", "--worker", worker,
                           "--view", "overview", "--format", "json"))


def _nested(marker: Path) -> None:
    marker.write_bytes(deep(30_000))  # under the marker's size limit: the depth limit stops it


def _fifo(marker: Path) -> None:
    marker.unlink()
    os.mkfifo(marker)


def _zero(marker: Path) -> None:
    marker.unlink()
    os.symlink("/dev/zero", marker)


def _sparse(marker: Path) -> None:
    with marker.open("r+b") as handle:
        handle.truncate(1 << 40)


def test_bad_commit_markers_cost_a_parse_not_the_cli(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_run(logs, WORKERS)
    workers = sorted(path.name.split(".")[0] for path in (logs / "job").iterdir())
    expected = {worker: _report(logs, worker, "--no-cache") for worker in workers}
    folder = tmp_path / "shared"
    cache = ("--cache-dir", f"file://{folder}")
    markers = {}
    for worker in workers:  # each table committed to the shared cache; its marker noted
        before = set(folder.rglob(MARKER))
        assert _report(logs, worker, *cache) == expected[worker]
        (markers[worker],) = {p for p in set(folder.rglob(MARKER)) - before
                              if p.parent.name != "payloads"}
    for worker, tamper in zip(workers, (_nested, _fifo, _zero, _sparse)):
        tamper(markers[worker])
        assert _report(logs, worker, *cache) == expected[worker]
        assert _report(logs, worker, *cache) == expected[worker]  # committed again, read back
