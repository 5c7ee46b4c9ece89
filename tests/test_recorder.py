"""Tests for tb_plugin.recorder.

Everything that touches torch runs in a subprocess: the recorder is used from training
scripts, the test process stays torch-free (one of the properties under test), and a
profiler crash cannot take pytest down. Runs in ~20 s on 2 cores.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.load import load_trace
from tb_plugin.recorder import (
    MEMORY_ACTIONS,
    MEMORY_CATEGORIES,
    Recorder,
    default_worker_name,
    sanitize_name,
)

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
TRACE_RE = re.compile(r"^(?P<worker>[A-Za-z0-9_-]+)\.(?P<ts>\d+)\.pt\.trace\.json\.gz$")
RAW_RE = re.compile(r"^(?P<worker>[A-Za-z0-9_-]+)\.(?P<ts>\d+)\.raw\.json\.gz$")
NODE_PID_RE = re.compile(r"^(.*)_(\d+)")  # the distributed view's hostname_pid convention
HOST = sanitize_name(socket.gethostname(), allow_underscore=False)

# Shared by the child scripts: a tiny model and loop; the child prints one RESULT line.
PRELUDE = textwrap.dedent(
    """
    import json, logging, os, sys
    import torch
    from torch import nn
    from tb_plugin.recorder import Recorder

    logging.basicConfig(level=logging.INFO)
    torch.manual_seed(0)

    def train(rec, steps, model=None):
        model = model or nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        for _ in range(steps):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
        return steps

    def report(**values):
        print("RESULT " + json.dumps(values), flush=True)
    """
)


def run_child(script: str, cwd: Path, timeout: float = 120, prefix: Sequence[str] = ()
              ) -> tuple[dict[str, Any], str]:
    """Run PRELUDE + script as a file (mp.spawn needs one); return RESULT and stderr. `prefix`:
    a command that runs the child (e.g. `setpriv` dropping capabilities)."""
    path = cwd / "child.py"
    path.write_text(PRELUDE + textwrap.dedent(script))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [*prefix, sys.executable, str(path)], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0][len("RESULT ") :]), proc.stderr


def trace_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.iterdir() if p.name.endswith(".pt.trace.json.gz"))


def raw_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in run_dir.iterdir() if p.name.endswith(".raw.json.gz"))


def load_json_gz(path: Path) -> Any:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def step_numbers(trace: dict[str, Any]) -> list[int]:
    names = (e.get("name", "") for e in trace["traceEvents"])
    return sorted(int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#"))


# -- fixtures: each runs one child process for several tests ---------------------------------


@pytest.fixture(scope="module")
def single_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """10 steps, schedule 1/1/2 x2 -> spans recording steps 2-3 and 6-7, memory timeline on."""
    cwd = tmp_path_factory.mktemp("single")
    result, stderr = run_child(
        """
        rec = Recorder("logs", run="single", wait=1, warmup=1, active=2, repeat=2,
                       memory_timeline=True)
        with rec:
            train(rec, 10)

        try:  # the training loop's own exception must reach the caller
            with Recorder("logs", run="boom", wait=0, warmup=1, active=5, repeat=1) as boom:
                train(boom, 2)
                raise KeyError("from the training loop")
        except KeyError:
            propagated = True
        else:
            propagated = False

        with Recorder("logs", run="off", enabled=False) as off:
            train(off, 6)

        report(pid=os.getpid(), worker=rec.worker_name, written=rec.written,
               failures=rec.failures, propagated=propagated, boom_written=boom.written)
        """,
        cwd,
    )
    result["run_dir"] = cwd / "logs" / "single"
    result["logdir"] = cwd / "logs"
    result["stderr"] = stderr
    return result


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """2 gloo ranks via mp.spawn, one span each."""
    cwd = tmp_path_factory.mktemp("ddp")
    result, _ = run_child(
        """
        import torch.distributed as dist
        import torch.multiprocessing as mp
        from torch.nn.parallel import DistributedDataParallel

        def worker(rank, store):
            # A file rendezvous, not a TCP port picked in advance: no port can be taken by
            # another process between choosing it and binding it (that race made this flaky).
            torch.set_num_threads(1)
            dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                                    world_size=2)
            model = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 2)))
            with Recorder("logs", run="ddp", wait=0, warmup=1, active=1, repeat=1) as rec:
                train(rec, 3, model)
            dist.destroy_process_group()

        if __name__ == "__main__":
            mp.spawn(worker, args=(os.path.abspath("rendezvous"),), nprocs=2)
            report(done=True)
        """,
        cwd,
    )
    result["run_dir"] = cwd / "logs" / "ddp"
    return result


# -- import and naming (no torch in this process) -------------------------------------------


def test_import_does_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys, tb_plugin.recorder as r\n"
        "rec = r.Recorder('logs', run='x', worker='w', memory_timeline=True)\n"
        "print(rec.worker_name, rec.run_dir)\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[]"
    assert not (tmp_path / "logs").exists()  # constructing a Recorder writes nothing


def test_default_worker_name_is_parseable() -> None:
    name = default_worker_name(rank=3, hostname="gpu_node-7.cluster.example.com")
    assert name == f"gpu-node-7-cluster-example-com_{os.getpid()}_rank3"
    node, pid = NODE_PID_RE.match(name).groups()
    assert (node, int(pid)) == ("gpu-node-7-cluster-example-com", os.getpid())
    assert default_worker_name(hostname="h") == f"h_{os.getpid()}"
    assert "." not in default_worker_name()


def test_launcher_rank_is_used_before_init(monkeypatch: pytest.MonkeyPatch) -> None:
    from tb_plugin.recorder import _env_rank

    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    assert _env_rank() == 2
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert _env_rank() is None


def test_explicit_worker_name_is_sanitised() -> None:
    assert Recorder("logs", worker="my worker/1.a").worker_name == "my-worker-1-a"
    assert sanitize_name("a b/c\\d:e") == "a-b-c-d-e"


@pytest.mark.parametrize("bad", [{"active": 0}, {"wait": -1}, {"repeat": 1.5}])
def test_invalid_schedule_is_rejected_up_front(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Recorder("logs", **bad)


def test_memory_timeline_needs_stack_shapes_and_memory() -> None:
    assert Recorder("logs", memory_timeline=True).memory_timeline
    assert not Recorder("logs", memory_timeline=True, with_stack=False).memory_timeline


def test_memory_decoding_tables_match_torch_enums() -> None:
    assert MEMORY_ACTIONS[2] == "CREATE" and MEMORY_ACTIONS[4] == "DESTROY"
    assert len(MEMORY_CATEGORIES) == 8 and MEMORY_CATEGORIES[7] == "UNKNOWN"


# -- single process ------------------------------------------------------------------------


def test_single_process_writes_one_trace_per_span(single_run: dict[str, Any]) -> None:
    traces = trace_files(single_run["run_dir"])
    assert len(traces) == 2
    expected_worker = f"{HOST}_{single_run['pid']}"
    assert single_run["worker"] == expected_worker
    stamps = []
    for path in traces:
        match = TRACE_RE.match(path.name)
        assert match, path.name
        assert match["worker"] == expected_worker
        stamps.append(int(match["ts"]))
    now_ms = time.time() * 1000
    assert all(abs(now_ms - ts) < 3_600_000 for ts in stamps)  # milliseconds, not ns
    assert stamps[0] < stamps[1]
    assert single_run["failures"] == 0


def test_single_process_spans_hold_the_scheduled_steps(single_run: dict[str, Any]) -> None:
    first, second = (load_json_gz(p) for p in trace_files(single_run["run_dir"]))
    assert step_numbers(first) == [2, 3]
    assert step_numbers(second) == [6, 7]
    cats = {e.get("cat") for e in first["traceEvents"]}
    assert {"cpu_op", "python_function", "cpu_instant_event", "fwdbwd"} <= cats
    assert first.get("record_shapes") == 1 and first.get("profile_memory") == 1


def test_memory_timeline_written_next_to_each_trace(single_run: dict[str, Any]) -> None:
    run_dir = single_run["run_dir"]
    raws = raw_files(run_dir)
    assert [RAW_RE.match(p.name).groups() for p in raws] == [
        TRACE_RE.match(p.name).groups() for p in trace_files(run_dir)
    ]
    records = load_json_gz(raws[0])
    assert records and all(len(r) == 4 for r in records)
    assert {r[1] for r in records} <= set(MEMORY_ACTIONS)
    assert {r[3] for r in records} <= set(MEMORY_CATEGORIES)
    assert any(r[1] == 2 and r[2] > 0 for r in records)  # some allocation was seen


def test_written_lists_files_and_nothing_partial_is_left(single_run: dict[str, Any]) -> None:
    run_dir = single_run["run_dir"]
    assert sorted(single_run["written"]) == sorted(
        os.path.join("logs", "single", p.name) for p in run_dir.iterdir()
    )
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]


def test_training_exception_propagates_and_span_is_kept(single_run: dict[str, Any]) -> None:
    assert single_run["propagated"]
    # The active=5 span cut short by the error is still saved: step 1, plus step 2 that the
    # last rec.step() opened and stop() closed.
    (path,) = single_run["boom_written"]
    assert step_numbers(load_json_gz(single_run["logdir"].parent / path)) == [1, 2]


def test_disabled_recorder_writes_nothing(single_run: dict[str, Any]) -> None:
    assert not (single_run["logdir"] / "off").exists()


def test_single_trace_parses_with_ingest(single_run: dict[str, Any]) -> None:
    for path in trace_files(single_run["run_dir"]):
        table = load_trace(str(path), use_cache=False)
        assert len(table) > 0
        names = table.events["name"].astype(str)
        assert names.str.startswith("ProfilerStep#").sum() == 2


# -- failures never crash training -----------------------------------------------------------

FAILING_RUN = """
rec = Recorder(LOGDIR, run="r", wait=0, warmup=1, active=1, repeat=2, memory_timeline=True)
with rec:
    steps = train(rec, 6)
report(steps=steps, written=rec.written, failures=rec.failures)
"""


def test_logdir_that_is_a_file_does_not_crash(tmp_path: Path) -> None:
    (tmp_path / "logs").write_text("not a directory")
    result, stderr = run_child(FAILING_RUN.replace("LOGDIR", "'logs'"), tmp_path)
    assert result == {"steps": 6, "written": [], "failures": 2}
    assert "torch-prof recorder: cannot write traces" in stderr


def test_read_only_logdir_does_not_crash(tmp_path: Path) -> None:
    """A logdir without write permission. Root ignores permission bits through its
    CAP_DAC_OVERRIDE, so the child runs without it (util-linux `setpriv`): the same EACCES
    whoever runs the tests."""
    (tmp_path / "logs").mkdir(mode=0o555)
    drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
    result, stderr = run_child(FAILING_RUN.replace("LOGDIR", "'logs'"), tmp_path, prefix=drop)
    assert result == {"steps": 6, "written": [], "failures": 2}
    assert "torch-prof recorder: cannot write traces" in stderr


def test_disk_full_loses_only_that_span(tmp_path: Path) -> None:
    fail_first_export = textwrap.dedent(
        """
        import errno
        import torch.profiler
        real_export = torch.profiler.profile.export_chrome_trace
        calls = []

        def export_or_fail(self, path, *args, **kwargs):
            calls.append(path)
            if len(calls) == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_export(self, path, *args, **kwargs)

        torch.profiler.profile.export_chrome_trace = export_or_fail
        """
    )
    script = fail_first_export + FAILING_RUN.replace("LOGDIR", "'logs'")
    result, stderr = run_child(script, tmp_path)
    assert result["steps"] == 6 and result["failures"] == 1
    run_dir = tmp_path / "logs" / "r"
    assert len(trace_files(run_dir)) == 1
    assert len(raw_files(run_dir)) == 1  # no memory file for the span whose trace failed
    assert sorted(os.listdir(run_dir)) == sorted(os.path.basename(p) for p in result["written"])
    assert "No space left on device" in stderr


# -- distributed ---------------------------------------------------------------------------


def test_ddp_two_workers_with_ranks(ddp_run: dict[str, Any]) -> None:
    traces = trace_files(ddp_run["run_dir"])
    assert len(traces) == 2
    ranks = {}
    for path in traces:
        worker = TRACE_RE.match(path.name)["worker"]
        match = re.fullmatch(rf"{re.escape(HOST)}_(\d+)_rank(\d)", worker)
        assert match, worker
        node, pid = NODE_PID_RE.match(worker).groups()
        assert (node, pid) == (HOST, match[1])
        ranks[int(match[2])] = path
    assert sorted(ranks) == [0, 1]
    for rank, path in ranks.items():
        trace = load_json_gz(path)
        info = trace.get("distributedInfo", {})
        assert (info.get("rank"), info.get("world_size"), info.get("backend")) == (rank, 2, "gloo")
        names = {e.get("name") for e in trace["traceEvents"]}
        assert "gloo:all_reduce" in names
        assert step_numbers(trace) == [1]


def test_ddp_traces_parse_with_ingest(ddp_run: dict[str, Any]) -> None:
    for path in trace_files(ddp_run["run_dir"]):
        table = load_trace(str(path), use_cache=False)
        assert len(table) > 0
        assert (table.events["name"].astype(str) == "gloo:all_reduce").any()


# -- committed samples -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run", "workers", "with_raw"),
    [("cnn_bs32", 1, True), ("cnn_bs64", 1, True), ("ddp_gloo", 2, False)],
)
def test_committed_samples_are_complete(run: str, workers: int, with_raw: bool) -> None:
    run_dir = SAMPLES / run
    traces = trace_files(run_dir)
    names = [TRACE_RE.match(p.name) for p in traces]
    assert all(names) and len(traces) == 2 * workers  # 2 spans per worker
    assert len({m["worker"] for m in names}) == workers
    assert len(raw_files(run_dir)) == (len(traces) if with_raw else 0)
    for path in traces:
        events = load_json_gz(path)["traceEvents"]
        event_names = {e.get("name", "") for e in events}
        assert any(n.startswith("enumerate(DataLoader)#") for n in event_names)
        assert any(n.startswith("Optimizer.step#") for n in event_names)
        assert any(n.startswith("nn.Module: ") for n in event_names)
        assert "[memory]" in event_names
        assert (workers == 2) == ("gloo:all_reduce" in event_names)
