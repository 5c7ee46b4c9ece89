"""Issue 32 through the CLI, a real process: a shared cache (file://) whose commit markers were
replaced after a first run (a depth bomb, a FIFO, a symlink to /dev/zero, a 1 TB sparse file).
Before the fix the depth bomb crashed `summary` with a traceback, /dev/zero read until
MemoryError and the FIFO hung it. Now each marker is ignored, that file parsed again, and the
CLI answers what it answered on a clean cache, in bounded memory."""

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


def _summary(logs: Path, cache: str) -> dict[str, Any]:
    run = run_cli("--cache-dir", cache, "summary", str(logs), "--json",
                  env={"TORCH_PROF_PARSE_PROCESSES": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert run.peak_rss < BASE_BOUND, run.peak_rss
    return json.loads(run.stdout)


def _spans(listing: dict[str, Any]) -> dict[str, tuple[str, int]]:
    (run,) = listing["runs"]
    return {w["name"]: (w["spans"][0]["state"], w["spans"][0]["events"]) for w in run["workers"]}


def _events(path: Path) -> int:
    return len(json.loads(path.read_bytes())["traceEvents"])


def test_bad_commit_markers_cost_a_parse_not_the_cli(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "logs", 4)
    folder = tmp_path / "shared"
    cache = f"file://{folder}"
    expected = {path.name.split(".")[0]: ("ok", _events(path))
                for path in sorted(run_dir.glob("*.pt.trace.json"))}
    assert _spans(_summary(tmp_path / "logs", cache)) == expected
    markers = sorted(p for p in folder.rglob(MARKER) if p.parent.name != "payloads")
    assert len(markers) == 4  # one committed table per rank
    markers[0].write_bytes(deep(100_000))
    for marker in markers[1:]:
        marker.unlink()
    os.mkfifo(markers[1])
    os.symlink("/dev/zero", markers[2])
    with markers[3].open("wb") as handle:
        handle.truncate(1 << 40)
    assert _spans(_summary(tmp_path / "logs", cache)) == expected
