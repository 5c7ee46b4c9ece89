"""What `report` reads and prints (`reports.py`, `discovery.discover_run`, the table format):

- `discover_run` finds each run exactly as `discover_runs` does, listing only its folder;
  a name with an empty, `.` or `..` part is never a path (None), nor is an unknown name;
- a report on one run neither reads nor warns about another run's files (a FIFO and a broken
  file beside it);
- a cached report is the cache's payload: with the trace file corrupted in place (same size and
  mtime), the report is unchanged, while `--no-cache` reads the file and fails (exit 1);
- `--format table` leads with the conclusions (each recommendation, priced ones with their
  saving; the step time; the GPU summary), then the table without its empty columns.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tb_plugin import cli
from tb_plugin.discovery import discover_run, discover_runs
from tb_plugin.output.conclusions import conclusions_text, duration
from tb_plugin.output.encoding import plain
from tb_plugin.output.terminal import table_text
from tb_plugin.views.registry import SPECS
from tests.support import SAMPLES, SHARED_TRACES, needs_shared


def test_discover_run_is_discover_runs_for_each_run(tmp_path: Path) -> None:
    for name in ("cnn_bs32", "ddp_gloo"):
        shutil.copytree(SAMPLES / name, tmp_path / "group" / name)
    shutil.copytree(SAMPLES / "cnn_bs64", tmp_path / "top")
    runs = discover_runs(str(tmp_path))
    assert {r.name for r in runs} == {"group/cnn_bs32", "group/ddp_gloo", "top"}
    for run in runs:
        assert discover_run(str(tmp_path), run.name) == run
    for name in ("group", "group/../top", "./top", "top/", "", "..", "nope"):
        assert discover_run(str(tmp_path), name) is None, name
    root_run = discover_runs(str(tmp_path / "top"))[0]  # the logdir itself is a run
    assert discover_run(str(tmp_path / "top"), root_run.name) == root_run


def test_report_reads_and_warns_about_its_run_only(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    shutil.copytree(SAMPLES / "cnn_bs32", tmp_path / "good")
    other = tmp_path / "other"
    other.mkdir()
    os.mkfifo(other / "w0.1.pt.trace.json")
    (other / "w1.1.pt.trace.json").write_text('{"traceEvents": [{"ph": "X", "name": ')
    args = ["--cache-dir", str(tmp_path / "c"), "report", str(tmp_path), "--run", "good",
            "--view", "findings", "--format", "json"]
    assert cli.main(args) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["schema_version"] == 1
    assert [r.getMessage() for r in caplog.records if "other" in r.getMessage()] == []
    assert cli.main([*args[:2], "summary", str(tmp_path)]) == 0  # summary reads every run
    out, err = capsys.readouterr()
    assert any("w0.1.pt.trace.json: not a regular file" in r.getMessage()
               for r in caplog.records)
    assert "\nother\n  w1 " in out and "(the file was cut off)" in out


def test_a_cached_report_is_the_cached_payload(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SAMPLES / "cnn_bs32", tmp_path / "run")
    trace = sorted((tmp_path / "run").glob("*.pt.trace.json.gz"))[0]
    args = ["report", str(tmp_path), "--run", "run", "--view", "overview", "--format", "json"]
    assert cli.main(["--cache-dir", str(tmp_path / "c"), *args]) == 0
    first = capsys.readouterr().out
    stat = trace.stat()
    trace.write_bytes(b"\0" * stat.st_size)  # same size and mtime: the same cache entry
    os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cli.main(["--cache-dir", str(tmp_path / "c"), *args]) == 0
    assert capsys.readouterr().out == first
    assert cli.main(["--no-cache", *args]) == 1
    assert "error: " in capsys.readouterr().err


@needs_shared
def test_table_format_leads_with_the_conclusions(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["report", str(SHARED_TRACES), "--run", "alexnet_gpu", "--format"]
    assert cli.main([*args, "json", "--view", "overview"]) == 0
    overview = json.loads(capsys.readouterr().out)
    assert cli.main([*args, "table", "--view", "overview"]) == 0
    text = capsys.readouterr().out
    head = text[:text.index("\n\n")]  # the conclusions, then a blank line, then the table
    lines = head.splitlines()
    assert lines[0].startswith(f"Step time: {duration(overview['average']['total_us'])} mean "
                               f"over {len(overview['steps'])} steps")
    assert lines[1].startswith(f"GPU 0 {overview['gpus'][0]['name']}: utilization ")
    recommendations = overview["recommendations"]
    assert len(recommendations) >= 2 and lines[2] == "Recommendations:"
    for i, (line, item) in enumerate(zip(lines[3:], recommendations), 1):
        assert line.startswith(f"  {i}. [{item['severity']}] {item['title']}")
        assert ("saves up to" in line) is (item["saving_us"] is not None)
    assert len(lines) == 3 + len(recommendations)


def test_no_conclusions_no_lines_and_empty_columns_dropped(tmp_path: Path) -> None:
    assert conclusions_text("operators", {"rows": []}) == ""
    rows = [{"name": "a", "empty": None, "blank": "", "n": 1},
            {"name": "b", "empty": None, "blank": "", "n": None}]
    with open(tmp_path / "t.txt", "w") as out:
        table_text(lambda p: p["rows"], {"rows": rows}, out, width=200)
    text = (tmp_path / "t.txt").read_text()
    assert "name" in text and " n " in text
    assert "empty" not in text and "blank" not in text  # every cell empty
    every_empty = [{"x": None}, {"x": ""}]
    with open(tmp_path / "u.txt", "w") as out:  # no column with a value: all stay
        table_text(lambda p: p["rows"], {"rows": every_empty}, out, width=200)
    assert " x " in (tmp_path / "u.txt").read_text()


@needs_shared
def test_gpu_idle_table_is_one_table_per_part(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["report", str(SHARED_TRACES), "--run", "alexnet_gpu", "--view", "gpu_idle"]
    assert cli.main([*args, "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    parts = dict.fromkeys(row["table"] for row in plain(SPECS["gpu_idle"].rows(payload)))
    assert cli.main([*args, "--format", "table"]) == 0
    text = capsys.readouterr().out
    words = " ".join(text.split())  # a title longer than its table wraps
    found = [words.find(f"alexnet_gpu: gpu_idle: {p} ") for p in parts]
    assert -1 not in found and found == sorted(found), dict(zip(parts, found))
    assert words.count("alexnet_gpu: gpu_idle: ") >= len(parts)
    launch = payload["launch"]
    assert (f"Launches: {launch['kernels']} kernels, {launch['short_kernels']} shorter than "
            "their launch") in text


def test_a_cached_summary_loads_no_table(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`summary` stores each file's counts (`batch.SUMMARY_KEY`) and reads them back: with the
    traces corrupted in place (same size and mtime), the second summary is the first."""
    for name in ("cnn_bs32", "ddp_gloo", "compiled_cpu"):  # 7 files: the process pool
        shutil.copytree(SAMPLES / name, tmp_path / "logs" / name)
    cache = ["--cache-dir", str(tmp_path / "c")]
    args = ["summary", str(tmp_path / "logs"), "--json"]
    assert cli.main([*cache, *args]) == 0
    first = json.loads(capsys.readouterr().out)
    files = [span for run in first["runs"] for worker in run["workers"]
             for span in worker["spans"]]
    assert len(files) == 7 and {f["state"] for f in files} == {"ok"}
    for trace in (tmp_path / "logs").rglob("*.pt.trace.json.gz"):
        stat = trace.stat()
        trace.write_bytes(b"\0" * stat.st_size)
        os.utime(trace, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert cli.main([*cache, *args]) == 0
    assert json.loads(capsys.readouterr().out) == first
    assert cli.main(["--no-cache", *args]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert {span["state"] for run in fresh["runs"] for worker in run["workers"]
            for span in worker["spans"]} == {"error"}


def test_mcp_on_a_missing_logdir_exits_2_in_words(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["mcp", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope'} does not exist\n"
