"""Discovery on local folders (symlinks too) and an fsspec memory filesystem; the pairing of
memory-timeline exports with their traces."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Callable

import fsspec
import pytest

from tb_plugin.discovery import RunInfo, RunScanner, discover_runs, matching_timeline
from tb_plugin.load import load_trace
from tb_plugin.storage import open_ref
from tests.ingest.logdirs import TRACE, write_logdir

Scan = Callable[[str], list[RunInfo]]


def _scanner(logdir: str) -> list[RunInfo]:
    """The server's scanner: its first scan, then a second one, which finds the same runs (on
    a local logdir the same objects: these folders were just written, so they are listed again,
    and found as they were; other filesystems are listed in full)."""
    scanner = RunScanner()
    first = scanner(logdir)
    again = scanner(logdir)
    assert again == first
    if "://" not in logdir:
        assert all(a is b for a, b in zip(again, first))
    return again


#: Both scanners find the same runs: `discover_runs` (CLI, API) and `RunScanner` (server).
scanners = pytest.mark.parametrize("discover", [discover_runs, _scanner],
                                   ids=["discover_runs", "RunScanner"])


@scanners
def test_local_discovery(tmp_path: Path, discover: Scan) -> None:
    write_logdir(tmp_path / "logs")
    runs = {r.name: r for r in discover(str(tmp_path / "logs"))}
    assert sorted(runs) == ["deep/er/run_b", "legacy", "logs", "run_a"]
    run_a = runs["run_a"]
    assert list(run_a.workers) == ["host_1", "host_2"]
    assert [(s.span, s.timestamp) for s in run_a.workers["host_1"]] == [
        ("1", 99), ("2", 123), ("3", 1000)]  # numeric, not string, order
    assert [s.span for s in run_a.workers["host_2"]] == ["default"]
    run_b = runs["deep/er/run_b"]
    assert list(run_b.workers) == ["export"]
    assert [r.name for r in run_b.memory_timelines] == ["w.raw.json.gz"]
    assert list(runs["legacy"].workers) == ["autograd"]


@scanners
def test_symlinked_runs_are_followed_and_loops_do_not_hang(tmp_path: Path, discover: Scan) -> None:
    write_logdir(tmp_path / "real")
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    os.symlink(tmp_path / "real" / "run_a", logdir / "linked_run")
    os.symlink(logdir, logdir / "loop")
    names = [r.name for r in discover(str(logdir))]
    assert names == ["linked_run"]


@scanners
def test_memory_filesystem_discovery_and_load(discover: Scan) -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/tp_logs/run/w0.5.pt.trace.json", TRACE)
    fs.pipe("/tp_logs/run/w1.pt.trace.json.gz", gzip.compress(TRACE))
    runs = discover("memory://tp_logs")
    assert [r.name for r in runs] == ["run"]
    assert list(runs[0].workers) == ["w0", "w1"]
    table = load_trace(runs[0].workers["w1"][0].ref, use_cache=False)
    assert table.events["name"].tolist() == ["op"]


@scanners
def test_missing_logdir_gives_no_runs(tmp_path: Path, discover: Scan) -> None:
    assert discover(str(tmp_path / "nope")) == []


def test_matching_timeline(tmp_path: Path) -> None:
    for name in ("w_1.100.raw.json.gz", "w_1.200.raw.json.gz", "memory_timeline.raw.json.gz"):
        (tmp_path / name).write_bytes(gzip.compress(b"[]"))
    refs = [open_ref(str(tmp_path / n)) for n in ("w_1.100.raw.json.gz", "w_1.200.raw.json.gz")]
    assert matching_timeline("w_1.200.pt.trace.json.gz", refs).name == "w_1.200.raw.json.gz"
    assert matching_timeline("w_2.200.pt.trace.json.gz", refs) is None
    # a run's only export, not named after a trace, goes with every span; a named one does not
    lone = [open_ref(str(tmp_path / "memory_timeline.raw.json.gz"))]
    assert matching_timeline("rank0.1.pt.trace.json.gz", lone) is lone[0]
    assert matching_timeline("rank0.1.pt.trace.json.gz", refs[:1]) is None


@scanners
def test_each_span_carries_its_export(tmp_path: Path, discover: Scan) -> None:
    run = tmp_path / "logs" / "run"
    run.mkdir(parents=True)
    for stamp in ("100", "200"):
        (run / f"w.{stamp}.pt.trace.json").write_bytes(TRACE)
    (run / "w.200.raw.json.gz").write_bytes(gzip.compress(b"[]"))
    (info,) = discover(str(tmp_path / "logs"))
    first, second = info.workers["w"]
    assert first.memory_timeline is None
    assert second.memory_timeline is not None and second.memory_timeline.name == (
        "w.200.raw.json.gz")
    lone = tmp_path / "lone" / "run"
    lone.mkdir(parents=True)
    (lone / "w.100.pt.trace.json").write_bytes(TRACE)
    (lone / "memory.raw.json.gz").write_bytes(gzip.compress(b"[]"))
    (info,) = discover(str(tmp_path / "lone"))
    assert info.workers["w"][0].memory_timeline.name == "memory.raw.json.gz"
