"""Wiring tests of `python -m tb_plugin report`: the CLI's flags reach the right view spec with
the right options, and it prints that spec's payload encoded as the server encodes it (CSV as the
server's `format=csv`); usage errors exit with 2.

These compare the CLI with the same registry builders run in this process (`build_view`), so
they check wiring (flags, file selection, encoding), not the numbers: the analysis tests do that.
Runs `cli.main` in this process on samples/ (fast); one subprocess checks the module entry point.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tb_plugin import cli
from tb_plugin.discovery import RunInfo, discover_runs, matching_timeline
from tb_plugin.ingest import TraceTable
from tb_plugin.load import load_trace
from tb_plugin.output.encoding import plain
from tb_plugin.output.rows import csv_bytes
from tb_plugin.views.registry import SPECS, build_view

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
DDP = ("vm_9852_rank0", "vm_9853_rank1")


@pytest.fixture(scope="module")
def runs() -> dict[str, RunInfo]:
    return {run.name: run for run in discover_runs(str(SAMPLES))}


def table(runs: dict[str, RunInfo], run: str, worker: str = "vm_9710", span: str = "1"
          ) -> TraceTable:
    return load_trace(runs[run].span_file(worker, span).ref)


def report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["report", str(SAMPLES), *args])
    out, err = capsys.readouterr()
    return code, out, err


def report_json(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = report(capsys, *args)
    assert code == 0, err
    return json.loads(out)


def csv_of(view: str, payload: Any) -> str:
    return csv_bytes(SPECS[view].rows, payload).decode("utf-8")


# -- single-table views ---------------------------------------------------------------------------


def test_timeline_window_and_width(capsys: pytest.CaptureFixture[str],
                                   runs: dict[str, RunInfo]) -> None:
    cnn = table(runs, "cnn_bs32")
    whole = report_json(capsys, "--run", "cnn_bs32", "--view", "timeline")
    assert whole == plain(build_view(cnn, "timeline"))
    start = whole["trace_start_us"]
    end = start + (whole["trace_end_us"] - start) / 3
    zoomed = report_json(capsys, "--run", "cnn_bs32", "--view", "timeline", "--start-us",
                         repr(start), "--end-us", repr(end), "--width", "500")
    assert zoomed == plain(build_view(cnn, "timeline", start_us=start, end_us=end, width=500))
    assert zoomed["width"] == 500


def test_timeline_search_and_event(capsys: pytest.CaptureFixture[str],
                                   runs: dict[str, RunInfo]) -> None:
    cnn = table(runs, "cnn_bs32", span="2")
    args = ("--run", "cnn_bs32", "--span", "2")
    found = report_json(capsys, *args, "--view", "timeline_search", "--query", "relu",
                        "--limit", "5")
    assert found == plain(build_view(cnn, "timeline_search", query="relu", limit=5))
    event_id = found["matches"][0]["id"]
    details = report_json(capsys, *args, "--view", "timeline_event", "--event-id",
                          str(event_id))
    assert details == plain(build_view(cnn, "timeline_event", event_id=event_id))
    code, out, _ = report(capsys, *args, "--view", "timeline_search", "--query", "relu",
                          "--format", "csv")
    assert code == 0 and out == csv_of("timeline_search",
                                       build_view(cnn, "timeline_search", query="relu"))


def test_memory_device_and_range(capsys: pytest.CaptureFixture[str],
                                 runs: dict[str, RunInfo]) -> None:
    cnn = table(runs, "cnn_bs32")
    whole = report_json(capsys, "--run", "cnn_bs32", "--view", "memory")
    assert whole == plain(build_view(cnn, "memory"))
    t = whole["curves"]["CPU"]["t_us"]
    ranged = report_json(capsys, "--run", "cnn_bs32", "--view", "memory", "--device", "CPU",
                         "--start-us", repr(t[1]), "--end-us", repr(t[-2]))
    assert ranged == plain(build_view(cnn, "memory", device="CPU", start_us=t[1], end_us=t[-2]))
    code, out, _ = report(capsys, "--run", "cnn_bs32", "--view", "memory", "--format", "csv")
    assert code == 0 and out == csv_of("memory", build_view(cnn, "memory"))
    assert out.startswith("table,")


def test_memory_timeline(capsys: pytest.CaptureFixture[str], runs: dict[str, RunInfo],
                         tmp_path: Path) -> None:
    run = runs["cnn_bs32"]
    for span in ("1", "2"):
        ref = matching_timeline(run.span_file("vm_9710", span).ref.name, run.memory_timelines)
        payload = report_json(capsys, "--run", "cnn_bs32", "--span", span, "--view",
                              "memory_timeline")
        assert payload == plain(build_view(table(runs, "cnn_bs32", span=span),
                                           "memory_timeline", ref))
    only = tmp_path / "logs" / "exports"
    only.mkdir(parents=True)
    shutil.copy(run.memory_timelines[0].path, only / "memory.raw.json.gz")
    code = cli.main(["report", str(tmp_path / "logs"), "--run", "exports", "--view",
                     "memory_timeline", "--format", "csv"])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[0].startswith("t_us,PARAMETER,")
    code, _, err = report(capsys, "--run", "ddp_gloo", "--view", "memory_timeline")
    assert code == 2 and "no memory-timeline export" in err


def test_modules(capsys: pytest.CaptureFixture[str], runs: dict[str, RunInfo]) -> None:
    cnn = table(runs, "cnn_bs32")
    assert report_json(capsys, "--run", "cnn_bs32", "--view", "modules") == plain(
        build_view(cnn, "modules"))
    code, out, _ = report(capsys, "--run", "cnn_bs32", "--view", "modules", "--format", "csv")
    assert code == 0 and out == csv_of("modules", build_view(cnn, "modules"))
    assert out.startswith("depth,key,name,")


# -- several tables -------------------------------------------------------------------------------


def test_distributed_all_workers_of_a_span(capsys: pytest.CaptureFixture[str],
                                           runs: dict[str, RunInfo]) -> None:
    for span in (None, "2"):
        args = ["--run", "ddp_gloo", "--view", "distributed"] + (["--span", span] if span else [])
        payload = report_json(capsys, *args)
        tables = {w: table(runs, "ddp_gloo", w, span or "1") for w in DDP}
        assert payload == plain(build_view(tables, "distributed", {}))
        assert payload["workers"] == list(DDP) and payload["skipped"] == {}
    code, out, _ = report(capsys, "--run", "ddp_gloo", "--view", "distributed", "--format",
                          "csv")
    assert code == 0 and out.startswith("worker,name,")
    code, _, err = report(capsys, "--run", "ddp_gloo", "--view", "distributed", "--span", "7")
    assert code == 2 and "span '7'" in err


def test_distributed_leaves_out_broken_workers(capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    run = tmp_path / "logs" / "ddp"
    run.mkdir(parents=True)
    for path in (SAMPLES / "ddp_gloo").glob("*rank0*"):
        shutil.copy(path, run / path.name)
    (run / "vm_1_rank1.1795260318969.pt.trace.json").write_text("not a trace {")
    code = cli.main(["report", str(tmp_path / "logs"), "--run", "ddp", "--view",
                     "distributed"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["workers"] == ["vm_9852_rank0"]
    assert list(payload["skipped"]) == ["vm_1_rank1"]


def test_diff_options(capsys: pytest.CaptureFixture[str], runs: dict[str, RunInfo]) -> None:
    base = table(runs, "cnn_bs32")
    exp = table(runs, "cnn_bs64", span="2")
    args = ("--run", "cnn_bs32", "--view", "diff", "--exp-run", "cnn_bs64")
    root = report_json(capsys, *args, "--exp-worker", "vm_9710", "--exp-span", "2")
    assert root == plain(build_view(base, "diff", exp))
    node = report_json(capsys, *args, "--exp-span", "2", "--path", "0-1")
    assert node == plain(build_view(base, "diff", exp, path="0-1")) and node["path"] == "0-1"
    default = report_json(capsys, *args)  # exp worker and span: the first of cnn_bs64
    assert default == plain(build_view(base, "diff", table(runs, "cnn_bs64")))
    code, out, _ = report(capsys, *args, "--format", "csv")
    assert code == 0 and out.startswith("name,base_calls,")


# -- usage errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (("--view", "diff"), "needs --exp-run"),
    (("--view", "diff", "--exp-run", "nope"), "no run 'nope'"),
    (("--view", "diff", "--exp-run", "cnn_bs64", "--exp-span", "9"), "no span '9'"),
    (("--view", "diff", "--exp-run", "cnn_bs64", "--path", "0-999"), "no diff node"),
    (("--view", "memory", "--width", "10"), "--width not taken by --view memory"),
    (("--view", "memory", "--device", "GPU3"), "device 'GPU3'"),
    (("--view", "timeline", "--start-us", "5", "--end-us", "1"), "bad timeline window"),
    (("--view", "timeline", "--width", "0"),
     "parameter 'width' must be an integer from 1 to 16384; got '0'"),
    (("--view", "timeline", "--format", "csv"), "no table"),
    (("--view", "timeline_search"), "needs --query"),
    (("--view", "timeline_event", "--event-id", "999999"), "no event"),
    (("--view", "modules", "--exp-run", "cnn_bs64"), "--exp-run not taken"),
    (("--view", "bogus"), "unknown view 'bogus'"),
])
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                             message: str) -> None:
    code, out, err = report(capsys, "--run", "cnn_bs32", *args)
    assert code == 2 and out == "" and message in err, err


def test_entry_point_and_argparse_errors(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tb_plugin", "--cache-dir",
                               str(tmp_path / "c"), "report", str(SAMPLES), "--run", "cnn_bs32",
                               *args], capture_output=True, text=True, cwd=REPO, timeout=300)

    bad = run("--view", "timeline", "--width", "wide")
    assert bad.returncode == 2 and "parameter 'width' must be an integer" in bad.stderr
    good = run("--view", "modules")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["available"] is True


def test_view_names_and_flags_come_from_the_registry(capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    code, _, err = report(capsys, "--run", "cnn_bs32", "--view", "bogus")
    assert code == 2 and err.strip().endswith("known views: " + ", ".join(SPECS))
    assert {"operator_pies", "operator_stack", "kernel_pies"} <= set(SPECS)
    code, _, err = report(capsys, "--run", "cnn_bs32", "--view", "memory", "--top-n", "3")
    assert code == 2 and "--top-n not taken by --view memory" in err


def test_pies_and_stacks(capsys: pytest.CaptureFixture[str], runs: dict[str, RunInfo]) -> None:
    cnn = table(runs, "cnn_bs32")
    args = ("--run", "cnn_bs32")
    pies = report_json(capsys, *args, "--view", "operator_pies", "--top-n", "3")
    assert pies == plain(build_view(cnn, "operator_pies", top_n=3))
    name = report_json(capsys, *args, "--view", "operators")["rows"][0]["name"]
    stack = report_json(capsys, *args, "--view", "operator_stack", "--name", name)
    assert stack == plain(build_view(cnn, "operator_stack", name=name))
    code, _, err = report(capsys, *args, "--view", "operator_stack", "--name", "no such op")
    assert code == 2 and "no operator 'no such op' in this worker span" in err
    code, _, err = report(capsys, *args, "--view", "kernel_pies", "--top-n", "0")
    assert code == 2 and "parameter 'top_n' must be an integer from 1 to 1000000" in err
