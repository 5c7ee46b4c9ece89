"""Discovery on local folders (symlinks too) and an fsspec memory filesystem; cache; CLI."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import pandas as pd

from tb_plugin.cache import TraceCache
from tb_plugin.discovery import discover_runs
from tb_plugin.ingest import LoadState
from tb_plugin.load import load_trace
from tb_plugin.storage import open_ref
from tests.conftest import SHARED_TRACES, needs_shared

TRACE = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 1,
                                     "dur": 2, "pid": 1, "tid": 1}]}).encode()
REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> None:
    (root / "run_a").mkdir(parents=True)
    for stamp in ("99", "1000", "123"):
        (root / "run_a" / f"host_1.{stamp}.pt.trace.json").write_bytes(TRACE)
    (root / "run_a" / "host_2.pt.trace.json.gz").write_bytes(gzip.compress(TRACE))
    (root / "run_a" / "notes.txt").write_text("not a trace")
    (root / "deep" / "er" / "run_b").mkdir(parents=True)
    (root / "deep" / "er" / "run_b" / "export.json").write_bytes(TRACE)  # sniffed
    (root / "deep" / "er" / "run_b" / "config.json").write_text('{"lr": 0.1}')  # not a trace
    (root / "deep" / "er" / "run_b" / "w.raw.json.gz").write_bytes(gzip.compress(b"[]"))
    (root / "legacy").mkdir()
    (root / "legacy" / "autograd.json").write_text(
        '[{"name": "mm", "ph": "X", "ts": 1, "dur": 1, "pid": "CPU Functions", "tid": 0}]')
    (root / "top.pt.trace.json").write_bytes(TRACE)  # the logdir itself is a run


def test_local_discovery(tmp_path: Path) -> None:
    _tree(tmp_path / "logs")
    runs = {r.name: r for r in discover_runs(str(tmp_path / "logs"))}
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


def test_symlinked_runs_are_followed_and_loops_do_not_hang(tmp_path: Path) -> None:
    _tree(tmp_path / "real")
    logdir = tmp_path / "logdir"
    logdir.mkdir()
    os.symlink(tmp_path / "real" / "run_a", logdir / "linked_run")
    os.symlink(logdir, logdir / "loop")
    names = [r.name for r in discover_runs(str(logdir))]
    assert names == ["linked_run"]


def test_memory_filesystem_discovery_and_load() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/tp_logs/run/w0.5.pt.trace.json", TRACE)
    fs.pipe("/tp_logs/run/w1.pt.trace.json.gz", gzip.compress(TRACE))
    runs = discover_runs("memory://tp_logs")
    assert [r.name for r in runs] == ["run"]
    assert list(runs[0].workers) == ["w0", "w1"]
    table = load_trace(runs[0].workers["w1"][0].ref, use_cache=False)
    assert table.events["name"].tolist() == ["op"]


def test_missing_logdir_gives_no_runs(tmp_path: Path) -> None:
    assert discover_runs(str(tmp_path / "nope")) == []


def test_cache_roundtrip_identity_and_corruption(tmp_path: Path) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(TRACE)
    cache = TraceCache(tmp_path / "cache")
    first = load_trace(str(path), cache=cache)
    entry = next((tmp_path / "cache").glob("*/*"))
    again = load_trace(str(path), cache=cache)
    for name, frame in first.tables().items():
        pd.testing.assert_frame_equal(frame, again.tables()[name])
    (entry / "columns.npz").write_bytes(b"garbage")  # corrupt: must be discarded, not trusted
    assert load_trace(str(path), cache=cache).events["name"].tolist() == ["op"]
    path.write_bytes(TRACE.replace(b'"op"', b'"op2"'))  # new content, new identity
    os.utime(path, ns=(1, 1))
    assert load_trace(str(path), cache=cache).events["name"].tolist() == ["op2"]


def test_cache_payloads(tmp_path: Path) -> None:
    path = tmp_path / "w.pt.trace.json"
    path.write_bytes(TRACE)
    cache, calls = TraceCache(tmp_path / "cache"), []
    ref = open_ref(str(path))
    compute = lambda: calls.append(1) or {"x": [1, 2]}  # noqa: E731
    assert cache.payload(ref, "view=a", compute) == {"x": [1, 2]}
    assert cache.payload(ref, "view=a", compute) == {"x": [1, 2]}
    assert len(calls) == 1


def _cli(*args: str, cache_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tb_plugin", "--cache-dir", str(cache_dir),
                           *args], capture_output=True, text=True, cwd=REPO, timeout=300)


def test_cli_summary_reports_broken_workers_and_exits_zero(tmp_path: Path) -> None:
    _tree(tmp_path / "logs")
    (tmp_path / "logs" / "run_a" / "broken.1.pt.trace.json").write_text('{"traceEvents": [{"p')
    result = _cli("summary", str(tmp_path / "logs"), "--json", cache_dir=tmp_path / "c")
    assert result.returncode == 0, result.stderr
    runs = {r["name"]: r for r in json.loads(result.stdout)["runs"]}
    workers = {w["name"]: w for w in runs["run_a"]["workers"]}
    assert workers["broken"]["spans"][0]["state"] == LoadState.TRUNCATED
    assert workers["host_1"]["spans"][0]["state"] == LoadState.OK
    assert workers["host_1"]["spans"][0]["events"] == 1
    text = _cli("summary", str(tmp_path / "logs"), cache_dir=tmp_path / "c")
    assert "broken" in text.stdout and "cut off" in text.stdout


def test_cli_report_usage_errors(tmp_path: Path) -> None:
    _tree(tmp_path / "logs")
    result = _cli("report", str(tmp_path / "logs"), "--run", "nope", "--view", "overview",
                  cache_dir=tmp_path / "c")
    assert result.returncode == 2 and "no run 'nope'" in result.stderr


@needs_shared
def test_cli_summary_on_shared_traces(tmp_path: Path) -> None:
    result = _cli("summary", str(SHARED_TRACES), "--json", cache_dir=tmp_path / "c")
    assert result.returncode == 0, result.stderr
    runs = {r["name"]: r for r in json.loads(result.stdout)["runs"]}
    expected = {p.name for p in SHARED_TRACES.iterdir() if p.is_dir()}
    assert set(runs) == expected
    for run in runs.values():
        for worker in run["workers"]:
            for span in worker["spans"]:
                assert span["state"] == LoadState.OK and span["events"] > 0
    assert runs["memory_timeline_raw"]["memory_timelines"]
