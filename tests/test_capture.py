"""Capture on demand, end to end: a real CPU training job (`tests/support/capture_job.py`) with
the recorder in on-demand mode, asked through `torch-prof capture` (the CLI as a subprocess)
and through the request file; a 2-rank gloo job answering one request with one trace per rank.

Pinned: the trace holds exactly the N steps asked for, consecutive; the request's options
decide what is recorded (stacks, shapes); a malformed request is logged and ignored; a request
is answered once; a capture in progress is not restarted and a newer request is served after
it; `--wait` shows the status and exits 0 on success, 2 on usage errors; the trace loads in
the CLI's views. Synchronisation is on files the job writes, never on sleeps.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.capture import protocol
from tests.support import REPO, import_torch
from tests.support.capture_job import Job, running_job

pytestmark = pytest.mark.e2e


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tb_plugin", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO)


def trace_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


def steps_of(events: list[dict[str, Any]]) -> list[int]:
    return sorted(int(e["name"].split("#")[1]) for e in events
                  if str(e.get("name", "")).startswith("ProfilerStep#"))


def step_times(path: Path) -> list[tuple[float, float]]:
    """(start, end) of each recorded step, in microseconds since the epoch (the trace's
    `baseTimeNanoseconds` plus each event's `ts`: one clock for every trace of a process)."""
    with gzip.open(path, "rt") as handle:
        trace = json.load(handle)
    base = trace.get("baseTimeNanoseconds", 0) / 1000
    return sorted((base + e["ts"], base + e["ts"] + e["dur"]) for e in trace["traceEvents"]
                  if str(e.get("name", "")).startswith("ProfilerStep#"))


def request(job: Job, steps: int, **options: Any) -> protocol.CaptureRequest:
    made = protocol.new_request(steps, **options)
    protocol.write_request(str(job.run_dir), made)
    return made


def written_trace(job: Job, status: dict[str, Any]) -> Path:
    assert status["state"] == "written", status
    traces = [name for name in status["files"] if name.endswith(".pt.trace.json.gz")]
    assert len(traces) == 1, status
    return job.run_dir / traces[0]


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One job, asked several times; what each step showed is kept for the tests below."""
    import_torch()
    cwd = tmp_path_factory.mktemp("capture-job")
    logdir = cwd / "logs"
    seen: dict[str, Any] = {"logdir": logdir}
    with running_job(cwd, logdir, "job") as job:
        seen["listeners"] = {p.name: json.loads(p.read_text()) for p in job.wait_listening()}
        # 1. a malformed request (steps out of range): logged, ignored, training goes on
        (job.run_dir / protocol.REQUEST_NAME).write_text('{"id": "bad1", "steps": 0}')
        job.wait_log("ignoring the malformed request")
        seen["malformed_statuses"] = job.statuses("bad1")
        # 2. through the CLI, waiting: stacks on, shapes off
        cli = run_cli("capture", str(logdir), "--run", "job", "--steps", "3", "--with-stack",
                      "--no-shapes", "--wait")
        seen["cli"] = cli
        cli_id = cli.stdout.split("requested capture ", 1)[1].split(":", 1)[0]
        seen["cli_status"] = job.wait_written(cli_id)[0]
        # 3. the same request again (same id, new file version): not answered again
        protocol.write_request(str(job.run_dir), protocol.decode(
            (job.run_dir / protocol.REQUEST_NAME).read_bytes(), protocol.CaptureRequest))
        job.wait_log(f"request {cli_id} was answered already")
        # 4. a long capture, and a newer request while it records: served after it
        long = request(job, 20, with_stack=False)
        job.wait_for_state(long.id, "recording")
        newer = request(job, 2, with_stack=False)
        # read after the newer request was written: the long capture was still recording
        seen["long_after_newer"] = job.statuses(long.id)[0]
        seen["long"] = job.wait_written(long.id)[0]
        seen["newer"] = job.wait_written(newer.id)[0]
        seen["results"] = job.stop()
        seen["job"] = job
    return seen


def test_listener_marker_names_the_worker(single: dict[str, Any]) -> None:
    ((name, listener),) = single["listeners"].items()
    assert name == f".torch-prof-listen.{listener['worker']}"
    assert listener["rank"] is None  # one process, not distributed
    # the job removed its marker when it stopped
    assert not list(single["job"].run_dir.glob(".torch-prof-listen.*"))


def test_malformed_request_is_logged_and_ignored(single: dict[str, Any]) -> None:
    assert single["malformed_statuses"] == []
    assert "steps" in single["job"].stderr().split("ignoring the malformed request", 1)[1]


def test_cli_capture_waits_and_records_the_steps_asked(single: dict[str, Any]) -> None:
    cli, status = single["cli"], single["cli_status"]
    assert cli.returncode == 0, cli.stderr
    worker = status["worker"]
    assert f"{worker}: written: {status['files'][0]}" in cli.stdout
    assert (status["step"], status["steps"], status["reason"]) == (3, 3, "")
    events = trace_events(written_trace(single["job"], status))
    steps = steps_of(events)
    assert len(steps) == 3 and steps == list(range(steps[0], steps[0] + 3))


def test_request_options_decide_what_is_recorded(single: dict[str, Any]) -> None:
    asked = trace_events(written_trace(single["job"], single["cli_status"]))  # stacks, no shapes
    plain = trace_events(written_trace(single["job"], single["long"]))  # no stacks, shapes
    ops = [e for e in asked if e.get("cat") == "cpu_op"]
    plain_ops = [e for e in plain if e.get("cat") == "cpu_op"]
    assert ops and plain_ops
    assert any(e.get("cat") == "python_function" for e in asked)
    assert not any(e.get("cat") == "python_function" for e in plain)
    assert not any("Input Dims" in e.get("args", {}) for e in ops)
    assert any("Input Dims" in e.get("args", {}) for e in plain_ops)


def test_answered_once_and_a_capture_in_progress_is_not_restarted(
        single: dict[str, Any]) -> None:
    long, newer = single["long"], single["newer"]
    long_steps = steps_of(trace_events(written_trace(single["job"], long)))
    newer_steps = steps_of(trace_events(written_trace(single["job"], newer)))
    assert single["long_after_newer"]["state"] == "recording"
    assert single["long_after_newer"]["step"] < 20
    assert long_steps == list(range(long_steps[0], long_steps[0] + 20))  # not restarted
    assert len(newer_steps) == 2
    long_times = step_times(written_trace(single["job"], long))
    newer_times = step_times(written_trace(single["job"], newer))
    assert newer_times[0][0] > long_times[-1][1]  # the newer request was served after it
    (result,) = single["results"]
    ids = [capture["id"] for capture in result["finished"]]
    cli_id = single["cli_status"]["id"]
    assert ids == [cli_id, long["id"], newer["id"]]  # each once, in order; "bad1" never


def test_captured_traces_load_in_the_views(single: dict[str, Any]) -> None:
    status = single["cli_status"]
    summary = run_cli("--no-cache", "summary", str(single["logdir"]), "--json")
    assert summary.returncode == 0, summary.stderr
    (run,) = json.loads(summary.stdout)["runs"]
    (worker,) = run["workers"]
    assert (run["name"], worker["name"]) == ("job", status["worker"])
    assert [span["state"] for span in worker["spans"]] == ["ok"] * 3  # three captures
    report = run_cli("--no-cache", "report", str(single["logdir"]), "--run", "job", "--worker",
                     status["worker"], "--span", "1", "--view", "operator", "--format", "json")
    assert report.returncode == 0, report.stderr
    names = {row["name"] for row in json.loads(report.stdout)["rows"]}
    assert {"aten::linear", "aten::relu"} <= names


def test_cli_refuses_without_a_listening_job(tmp_path: Path) -> None:
    (tmp_path / "idle").mkdir()
    result = run_cli("capture", str(tmp_path), "--run", "idle", "--steps", "2")
    assert result.returncode == 2
    assert "no job listens in" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "idle" / protocol.REQUEST_NAME).exists()
    for bad in ("../elsewhere", "/", "a/../b"):
        result = run_cli("capture", str(tmp_path), "--run", bad, "--steps", "2")
        assert result.returncode == 2 and "not a folder name" in result.stderr
    for steps in ("0", str(protocol.MAX_STEPS + 1)):
        result = run_cli("capture", str(tmp_path), "--run", "idle", "--steps", steps)
        assert result.returncode == 2 and "--steps is 1 to" in result.stderr


def test_gloo_job_answers_one_request_with_one_trace_per_rank(tmp_path: Path) -> None:
    import_torch()
    logdir = tmp_path / "logs"
    with running_job(tmp_path, logdir, "ddp", ranks=2) as job:
        markers = job.wait_listening(2)
        cli = run_cli("capture", str(logdir), "--run", "ddp", "--steps", "2", "--wait")
        assert cli.returncode == 0, cli.stderr + cli.stdout
        request_id = cli.stdout.split("requested capture ", 1)[1].split(":", 1)[0]
        statuses = job.wait_written(request_id, workers=2)
        results = job.stop()
    assert len(markers) == 2 and "2 worker(s)" in cli.stdout
    assert sorted(s["rank"] for s in statuses) == [0, 1]
    assert sorted(r["rank"] for r in results) == [0, 1]
    for status in statuses:
        assert status["worker"].endswith(f"_rank{status['rank']}")
        trace = written_trace(job, status)
        assert trace.name.startswith(status["worker"] + ".")
        events = trace_events(trace)
        assert len(steps_of(events)) == 2
        assert any(e.get("name") == "gloo:all_reduce" for e in events)
    traces = sorted(p.name for p in job.run_dir.glob("*.pt.trace.json.gz"))
    assert len(traces) == 2  # one request, one trace per rank, nothing else


def test_listen_steps_at_each_optimizer_step_and_says_why_no_snapshot(tmp_path: Path) -> None:
    """`listen()`: no `step()` in the loop; a memory snapshot asked on CPU is a note, and the
    capture is still written."""
    import_torch()
    logdir = tmp_path / "logs"
    with running_job(tmp_path, logdir, "listened", mode="listen") as job:
        job.wait_listening()
        made = request(job, 3, memory_snapshot=True)
        (status,) = job.wait_written(made.id)
        (result,) = job.stop()
    assert status["state"] == "written" and status["step"] == 3
    assert status["notes"] == ["no memory snapshot: CUDA is not available in this process"]
    assert len(status["files"]) == 1  # the trace only
    steps = steps_of(trace_events(written_trace(job, status)))
    assert len(steps) == 3
    assert [capture["id"] for capture in result["finished"]] == [made.id]
    assert not list(job.run_dir.glob(".torch-prof-listen.*"))  # stop() removed the marker
