"""Issue 19 through a real TensorBoard: hostile files beside healthy ones (bombs, FIFOs, a
symlink out of the logdir, a tampered cache, GPU-only and far-away traces), hostile requests
(extreme numbers, unknown formats, a sweep of distinct options), and TensorBoard SIGKILLed in
the middle of a parse (its parser processes must not outlive it). The CLI side is
tests/test_hostile_cli.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.cache import TraceCache
from tb_plugin.server.filestate import FileState
from tb_plugin.server.parse_child import SUMMARY_KEY, parse_file
from tb_plugin.server.tables import Tables
from tb_plugin.storage import open_ref
from tests.support import SAMPLES
from tests.support.hostile import (
    GOOD_EVENTS,
    events,
    gpu_only_trace,
    whitespace_bomb,
    write_json,
)
from tests.support.processes import descendants_of, wait_gone

from .harness import TensorBoard, assert_error, require_entry_point, running_tensorboard

KB = 1 << 10


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TensorBoard, Path]]:
    require_entry_point()
    root = tmp_path_factory.mktemp("hostile")
    logs, cache_dir = root / "logs", root / "cache"
    shutil.copytree(SAMPLES / "cnn_bs32", logs / "good")
    whitespace_bomb(logs / "bomb" / "w.pt.trace.json.gz", inflated_gb=1)  # default limits
    (logs / "fifo").mkdir()
    os.mkfifo(logs / "fifo" / "w.pt.trace.json")
    os.mkfifo(logs / "fifo" / "x.json")
    write_json(logs / "fifo" / "ok.pt.trace.json", {"traceEvents": json.loads(
        b"[" + events(0, 5) + b"]")})
    (logs / "escape").mkdir()
    os.symlink("/etc/passwd", logs / "escape" / "w.pt.trace.json")
    write_json(logs / "gpu" / "w.pt.trace.json", gpu_only_trace())
    write_json(logs / "far" / "w.pt.trace.json", {"traceEvents": [
        *json.loads(b"[" + events(0, 10) + b"]"),
        {"ph": "X", "cat": "cpu_op", "name": "far", "pid": 1, "tid": 1, "ts": 1e308}]})
    _tamper_summary(TraceCache(cache_dir), logs / "good")
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(cache_dir), TORCH_PROF_LOAD_WORKERS="2",
               TORCH_PROF_PAYLOAD_CACHE_MB="1", PYTHONUNBUFFERED="1")
    with running_tensorboard(logs, root / "tb.log", env) as tb:
        yield tb, cache_dir


def _tamper_summary(cache: TraceCache, run: Path) -> None:
    """Issue 19 item 3: a cached summary that is valid JSON of the wrong type (`messages: 5`)
    for the first file of the run; its table is cached and valid. The cache is written as a
    server writes it: a parser's table handed over, written by the background writer."""
    ref = open_ref(str(sorted(run.glob("*.pt.trace.json*"))[0]))
    parsed = parse_file(ref.identity(), ref, str(cache.root))
    assert parsed.table is not None
    tables = Tables(cache, 1 << 30)
    tables.adopt(FileState(ref, ref.identity()), parsed.table, parsed.summary)
    assert tables.wait_written(60)
    path = next(cache.root.rglob("pinned-*.json"))
    stored = json.loads(path.read_text())
    assert stored["key"] == SUMMARY_KEY
    stored["value"]["messages"] = 5
    path.write_text(json.dumps(stored))


def _states(listing: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(run["name"], worker["name"]): worker["spans"][0]
            for run in listing["runs"] for worker in run["workers"]}


def test_every_file_ends_in_a_clear_state(hostile: tuple[TensorBoard, Path]) -> None:
    tb, _ = hostile
    states = _states(tb.wait_loaded(timeout=300))
    good = [span for (run, _), span in states.items() if run == "good"]
    assert good and all(span["state"] == "ok" for span in good)  # the tampered summary too
    bomb = states[("bomb", "w")]
    assert (bomb["state"], bomb["events"]) == ("truncated", GOOD_EVENTS)
    assert "TORCH_PROF_MAX_INFLATE_RATIO" in " ".join(bomb["messages"])
    assert {worker for run, worker in states if run == "fifo"} == {"ok"}  # FIFOs skipped
    assert states[("gpu", "w")]["state"] == "ok"
    assert (states[("far", "w")]["state"], states[("far", "w")]["events"]) == ("partial", 10)
    assert states[("escape", "w")]["state"] == "error"  # /etc/passwd is not a trace


def test_download_never_leaves_the_logdir(hostile: tuple[TensorBoard, Path]) -> None:
    tb, _ = hostile
    tb.wait_loaded(timeout=300)
    error = assert_error(tb.get("trace/download", {"run": "escape", "worker": "w",
                                                   "span": "default"}), 403)
    assert "outside the logdir" in error["message"]
    assert "TORCH_PROF_SERVE_OUTSIDE_LOGDIR" in error["message"]
    assert b"root:" not in tb.replies[-1].body
    ok = tb.get("trace/download", {"run": "fifo", "worker": "ok", "span": "default"})
    assert ok.status == 200 and json.loads(ok.body)["traceEvents"][0]["name"] == "aten::mm"


@pytest.mark.parametrize("params", [
    {"start_us": "-1e308", "end_us": "1e308"}, {"start_us": "0", "end_us": "1e308"},
    {"start_us": "1e300", "end_us": "1e301"}])
def test_extreme_windows_answer_400(hostile: tuple[TensorBoard, Path],
                                    params: dict[str, str]) -> None:
    tb, _ = hostile
    tb.wait_loaded(timeout=300)
    reply = tb.get("timeline", {"run": "far", "worker": "w", "span": "default", **params})
    assert "-1e+17 to 1e+17" in assert_error(reply, 400)["message"]


def test_far_trace_and_gpu_only_trace_views(hostile: tuple[TensorBoard, Path]) -> None:
    tb, _ = hostile
    tb.wait_loaded(timeout=300)
    timeline = tb.get("timeline", {"run": "far", "worker": "w", "span": "default"})
    assert timeline.status == 200 and timeline.json()["stats"]["events"] == 10
    side = {"run": "gpu", "worker": "w", "span": "default"}
    for route in ("overview", "operators", "kernels", "operators/pies", "kernels/pies",
                  "timeline"):
        reply = tb.get(route, side)
        assert reply.status == 200, (route, reply.body[:300])
    diff = tb.get("diff", {**side, "exp_run": "gpu", "exp_worker": "w", "exp_span": "default"})
    assert diff.status == 200, diff.body[:300]
    # no memory records: the Memory view is not offered (404), rather than a crash (500)
    assert_error(tb.get("memory", side), 404)
    kernels = tb.get("kernels", {"run": "gpu", "worker": "w", "span": "default"}).json()
    assert sorted(row["calls"] for row in kernels["rows"]) == [3, 3]


@pytest.mark.parametrize("route", ["runs", "views", "viewspecs", "trace/download"])
def test_unknown_format_answers_400(hostile: tuple[TensorBoard, Path], route: str) -> None:
    tb, _ = hostile
    reply = tb.get(route, {"format": "xml", "run": "good", "worker": "w", "span": "default"})
    assert "format" in assert_error(reply, 400)["message"]


def test_payload_cache_is_bounded(hostile: tuple[TensorBoard, Path]) -> None:
    tb, cache_dir = hostile
    listing = tb.wait_loaded(timeout=300)
    worker = next(w["name"] for r in listing["runs"] if r["name"] == "good"
                  for w in r["workers"])
    span = _span_of(listing, worker)
    for top_n in range(1, 201):  # each a new payload file on disk
        reply = tb.get("operators/pies", {"run": "good", "worker": worker, "span": span,
                                          "top_n": top_n})
        assert reply.status == 200
    payloads = [p for p in cache_dir.rglob("payloads/*.json")
                if not p.name.startswith("pinned-")]  # the per-file summaries stay
    by_folder: dict[Path, list[int]] = {}
    for path in payloads:
        by_folder.setdefault(path.parent, []).append(path.stat().st_size)
    largest = max(by_folder.values(), key=sum)
    assert sum(largest) <= (1 << 20) + max(largest), sum(largest)  # the budget, plus the newest
    assert len(largest) < 200  # 200 distinct payloads were written to that folder: evicted


def _span_of(listing: dict[str, Any], worker: str) -> str:
    return next(w["spans"][0]["span"] for r in listing["runs"] if r["name"] == "good"
                for w in r["workers"] if w["name"] == worker)


# -- 2 (fair scheduling) and 7 (orphans): one slow hostile file, then SIGKILL ------------------


def test_parsers_die_with_a_killed_tensorboard(tmp_path: Path) -> None:
    require_entry_point()
    logs = tmp_path / "logs"
    whitespace_bomb(logs / "slow" / "w.pt.trace.json.gz", inflated_gb=10)
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(tmp_path / "cache"),
               TORCH_PROF_LOAD_WORKERS="2", TORCH_PROF_MAX_INFLATE_RATIO="1000000")
    with running_tensorboard(logs, tmp_path / "tb.log", env) as tb:
        def state(run: str) -> list[str]:
            return [s["state"] for (name, _), s in _states(tb.runs()).items() if name == run]

        # the slow file is dispatched alone (it may take both processes: a split parse) ...
        tb.wait_for("the slow file loading", lambda: state("slow") == ["loading"], timeout=120)
        # ... yet holds one slot only: a healthy run found by the next rescan is parsed beside it
        shutil.copytree(SAMPLES / "cnn_bs32", logs / "good")
        tb.wait_for("the healthy run parsed", lambda: state("good") and all(
            s == "ok" for s in state("good")), timeout=240)
        assert state("slow") == ["loading"]
        parsers = descendants_of(tb.process.pid)
        assert parsers, "no parser process is running"
        tb.process.send_signal(signal.SIGKILL)  # as the out-of-memory killer does
        tb.process.wait()
        assert wait_gone(parsers, timeout=60) == [], "parser processes outlived TensorBoard"
