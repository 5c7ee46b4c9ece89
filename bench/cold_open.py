"""Cold open through a real TensorBoard, ours beside the old plugin, and where our time goes.

    .venv/bin/python bench/cold_open.py [--sizes 50,200,800] [--old-sizes 200,800] [--processes 1,2]

Uses bench/run.py's recorded traces (record them first: `bench/run.py` or its `--sizes`) and
its old-plugin venv. For each size, in one run:

1. **In-process parse** (`child_parse.py`, a fresh process per measurement): our parse with
   1..N processes, and the machine's limit: a C JSON decoder (msgspec) over the same bytes.
2. **Cold open, ours**: TensorBoard started (`tb_logged.py`: the console script's entry point
   plus a DEBUG log of torch-prof's `timing:` lines) on a logdir holding only that run, with an
   empty cache; the benchmark then does what the UI does on opening the page (`/runs`,
   `/views`, `/workers`, `/spans`) and polls `/overview` and `/operators` until both are served
   (every 20 ms). `total` is from starting TensorBoard to the Operator payload. The breakdown
   comes from the server's own log. Twice more as the UI polls: after each 202 it waits the
   reply's `retry_after_ms` (the server's estimate of the rest of the parse), and, as the UI
   did before that hint, 1 s (Retry-After).
3. **Cold open, old plugin** (torch-tb-profiler 0.4.3 in bench/_work/oldvenv, its own
   TensorBoard): the same page-open requests to its API until `/overview` and `/operation`
   are served.

Writes bench/cold_results.md (committed) and bench/_work/cold.json (raw).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Optional

import harness
import report
from benchpaths import BENCH, MAIN_PYTHON, OLD_PYTHON, REPO, TRACES, WORK, log

COLD = WORK / "cold"
RESULTS = BENCH / "cold_results.md"
RAW = WORK / "cold.json"
_URL_LINE = re.compile(r"TensorBoard \S+ at (http://\S+?)/? \(Press CTRL\+C")
_TIMING = re.compile(r"^(\d+\.\d+) torch-prof timing: (\w+)(?: ([\d.-]+) s)?")
POLL_S = 0.02
REQUEST_TIMEOUT_S = 60  # the old plugin answers nothing while it loads a big file


def trace_of(size: int) -> Path:
    found = sorted((TRACES / f"{size}mb").glob("*.pt.trace.json"))
    if not found:
        raise SystemExit(f"no recorded {size} MB trace: run bench/run.py --sizes {size} first")
    return found[0]


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (urllib.error.URLError, TimeoutError, ConnectionError):  # busy server: not yet
        return 0, None


def _until_ok(url: str, deadline: float, polling: str = "bench") -> Any:
    """GET until 200. After a 202 the benchmark asks again in POLL_S ("bench"), or as the UI
    does: after the reply's `retry_after_ms` ("ui"), or after its Retry-After, 1 s ("1s", the
    UI before that hint existed)."""
    while True:
        status, body = _get(url)
        if status == 200:
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(url)
        wait = POLL_S
        if status == 202 and polling == "ui":
            wait = float((body or {}).get("retry_after_ms", 1000)) / 1000
        elif status == 202 and polling == "1s":
            wait = 1.0
        time.sleep(wait)  # polling the server as a client, not synchronising threads


def _start(cmd: list[str], env: dict[str, str], log_path: Path, deadline: float
           ) -> tuple[subprocess.Popen, str]:
    with open(log_path, "wb") as out:
        popen = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 cwd=str(log_path.parent))
    while True:
        match = _URL_LINE.search(log_path.read_text(errors="replace"))
        if match:
            return popen, match.group(1)
        if popen.poll() is not None or time.monotonic() > deadline:
            popen.kill()
            raise RuntimeError(f"TensorBoard did not start: {log_path}")
        time.sleep(POLL_S)


def _logdir(size: int, who: str, source: Optional[Path] = None) -> Path:
    """A logdir holding only the run of this size (a symlink to the recorded folder, or to
    `source`, a run folder recorded elsewhere)."""
    root = COLD / f"{who}-{size}mb"
    shutil.rmtree(root, ignore_errors=True)
    (root / "logdir").mkdir(parents=True)
    (root / "logdir" / f"bench{size}").symlink_to(source or TRACES / f"{size}mb",
                                                  target_is_directory=True)
    return root


def _query(**params: str) -> str:
    return urllib.parse.urlencode(params)


def cold_ours(size: int, timeout: float, polling: str = "bench",
              source: Optional[Path] = None) -> dict[str, Any]:
    """Our cold open; `polling` as in `_until_ok` ("ui", "1s": the page's first questions
    wait for 200s too, as the UI does); `source`: the run folder (default: bench/run.py's)."""
    root = _logdir(size, "ours", source)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PYTHONPATH=str(REPO), TORCH_PROF_CACHE_DIR=str(root / "cache"),
               TORCH_PROF_BENCH_LOG=str(root / "timing.log"))
    cmd = [str(MAIN_PYTHON), str(BENCH / "tb_logged.py"), "--logdir", str(root / "logdir"),
           "--port", "0", "--host", "127.0.0.1"]
    wall0, start = time.time(), time.monotonic()
    deadline = start + timeout
    popen, base = _start(cmd, env, root / "tb.log", deadline)
    marks: dict[str, float] = {"tensorboard_up": time.monotonic() - start}
    try:
        api, run = f"{base}/data/plugin/torch_prof", f"bench{size}"
        while run not in [r["name"] for r in _until_ok(f"{api}/runs", deadline)["runs"]]:
            time.sleep(POLL_S)
        marks["run_listed"] = time.monotonic() - start
        if polling == "bench":
            _get(f"{api}/views?{_query(run=run)}")  # the UI's first question: 202 while loading
        else:
            _until_ok(f"{api}/views?{_query(run=run)}", deadline, polling)
        worker = _until_ok(f"{api}/workers?{_query(run=run, view='Overview')}", deadline)[0]
        span = _until_ok(f"{api}/spans?{_query(run=run, worker=worker)}", deadline)[0]
        file = _query(run=run, worker=worker, span=span)
        _until_ok(f"{api}/overview?{file}", deadline, polling)
        marks["overview"] = time.monotonic() - start
        _until_ok(f"{api}/operators?{file}", deadline, polling)
        marks["operators"] = time.monotonic() - start
    finally:
        _stop(popen)
    return {"status": "ok", "total_s": round(marks["operators"], 3),
            **{f"{k}_s": round(v, 3) for k, v in marks.items()},
            "breakdown": breakdown(root / "timing.log", wall0)}


def breakdown(path: Path, wall0: float) -> dict[str, float]:
    """The server's timing lines: durations summed per stage; `plugin_start` and `parsed_at`
    are offsets from the start of TensorBoard."""
    stages: dict[str, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        match = _TIMING.match(line)
        if not match:
            continue
        at, name, seconds = float(match.group(1)), match.group(2), match.group(3)
        if seconds is None:
            stages[f"{name}_at"] = round(at - wall0, 3)
        else:
            stages[name] = round(stages.get(name, 0.0) + float(seconds), 3)
            if name == "parse":
                stages["parsed_at"] = round(at - wall0, 3)
    return stages


def cold_old(size: int, timeout: float) -> dict[str, Any]:
    root = _logdir(size, "old")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    cmd = [str(OLD_PYTHON), "-m", "tensorboard.main", "--logdir", str(root / "logdir"),
           "--port", "0", "--host", "127.0.0.1"]
    start = time.monotonic()
    deadline = start + timeout
    popen, base = _start(cmd, env, root / "tb.log", deadline)
    marks = {"tensorboard_up": time.monotonic() - start}
    try:
        api, run = f"{base}/data/plugin/pytorch_profiler", f"bench{size}"
        while run not in (_until_ok(f"{api}/runs", deadline) or {}).get("runs", []):
            if time.monotonic() > deadline:
                raise TimeoutError("runs")
            time.sleep(POLL_S)
        marks["run_listed"] = time.monotonic() - start
        worker = _until_ok(f"{api}/workers?{_query(run=run, view='Overview')}", deadline)[0]
        span = _until_ok(f"{api}/spans?{_query(run=run, worker=worker)}", deadline)[0]
        file = _query(run=run, worker=worker, span=span)
        _until_ok(f"{api}/overview?{file}", deadline)
        marks["overview"] = time.monotonic() - start
        _until_ok(f"{api}/operation?{file}&group_by=Operation", deadline)
        marks["operators"] = time.monotonic() - start
    except TimeoutError as exc:
        return {"status": "timeout", "at": str(exc), "total_s": round(timeout, 1)}
    finally:
        _stop(popen)
    return {"status": "ok", "total_s": round(marks["operators"], 3),
            **{f"{k}_s": round(v, 3) for k, v in marks.items()}}


def _stop(popen: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL (the old plugin may ignore SIGTERM while loading a big file)."""
    popen.terminate()
    try:
        popen.wait(30)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait(30)


def in_process(size: int, processes: int, timeout: float) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(REPO)
    cmd = [str(MAIN_PYTHON), str(BENCH / "child_parse.py"), str(trace_of(size)), str(processes)]
    return harness.run_child(cmd, env, f"{size}mb.parse{processes}", timeout)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,200,800")
    parser.add_argument("--old-sizes", default="200,800", help="'' to skip the old plugin")
    parser.add_argument("--processes", default="", help="default: 1 and the usable cores")
    parser.add_argument("--skip-parse", action="store_true", help="cold opens only")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite cold_results.md from bench/_work/cold.json")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args(argv)
    if args.render:
        RESULTS.write_text(render(json.loads(RAW.read_text())))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    old_sizes = [int(s) for s in args.old_sizes.split(",") if s]
    counts = ([int(p) for p in args.processes.split(",") if p] if args.processes
              else sorted({1, len(os.sched_getaffinity(0))}))
    machine = report.machine_info()
    log(f"machine: {machine['summary']}, load {machine['loadavg_1m_at_start']}")
    rows: dict[str, Any] = {"machine": machine, "sizes": {}}
    for size in sizes:
        trace_of(size)
        row: dict[str, Any] = {"parse": {}}
        for processes in [] if args.skip_parse else counts:
            row["parse"][str(processes)] = result = in_process(size, processes, args.timeout)
            log(f"{size} MB in-process parse, {processes} processes: {_brief(result)}")
        row["ours"] = cold_ours(size, args.timeout)
        log(f"{size} MB cold open, ours: {row['ours']}")
        for polling in ("ui", "1s"):
            row[f"ours_{polling}"] = cold_ours(size, args.timeout, polling)
            log(f"{size} MB cold open, ours, polled as the UI ({polling}): "
                f"{row[f'ours_{polling}']['total_s']} s")
        if size in old_sizes:
            row["old"] = cold_old(size, args.timeout)
            log(f"{size} MB cold open, old plugin: {row['old']}")
        row["load_after"] = os.getloadavg()[0]
        rows["sizes"][str(size)] = row
        WORK.mkdir(parents=True, exist_ok=True)
        RAW.write_text(json.dumps(rows, indent=1))  # what was measured so far survives
    WORK.mkdir(parents=True, exist_ok=True)
    RAW.write_text(json.dumps(rows, indent=1))
    RESULTS.write_text(render(rows))
    print(RESULTS.read_text())
    return 0


def _brief(result: dict[str, Any]) -> str:
    keys = ("parse_s", "parse_mb_s", "limit_s", "limit_mb_s", "peak_rss_mb")
    return ", ".join(f"{k} {result.get(k)}" for k in keys)


def render(rows: dict[str, Any]) -> str:
    machine = rows["machine"]
    out = ["# Cold open and parse throughput (bench/cold_open.py)", "",
           f"Machine: {machine['summary']}; load average at start "
           f"{machine['loadavg_1m_at_start']}, after each size "
           + ", ".join(f"{size} MB: {row.get('load_after', 0):.1f}"
                       for size, row in rows["sizes"].items())
           + " (on a shared machine wall times inflate with the load; see the README). "
           "Generated by `bench/cold_open.py`; raw numbers in bench/_work/cold.json.", "",
           "## In-process parse vs the machine's limit", "",
           "| trace | processes | parse | MB/s | C JSON limit (msgspec, skip every field) | "
           "limit MB/s | msgspec to dicts |",
           "|---:|---:|---:|---:|---:|---:|---:|"]
    for size, row in rows["sizes"].items():
        for processes, r in row["parse"].items():
            generic = f"{r['generic_s']} s" if r.get("generic_s") else "-"
            out.append(f"| {size} MB | {processes} | {r.get('parse_s')} s | "
                       f"{r.get('parse_mb_s')} | {r.get('limit_s')} s | {r.get('limit_mb_s')} | "
                       f"{generic} |")
    out += ["", "## Cold open through TensorBoard (start to Overview + Operator served)", "",
            "The benchmark polls every 20 ms; the UI rows poll as the page does after each 202 "
            "(its first questions included).", "",
            "| trace | plugin | total | TensorBoard up | run listed | Overview | Operator |",
            "|---:|---|---:|---:|---:|---:|---:|"]
    labels = {"ours": "ours", "ours_ui": "ours, polled as the UI (`retry_after_ms`)",
              "ours_1s": "ours, polled every 1 s (the UI before `retry_after_ms`)",
              "old": "old"}
    for size, row in rows["sizes"].items():
        for key, who in labels.items():
            r = row.get(key)
            if r is None:
                continue
            if r.get("status") != "ok":
                out.append(f"| {size} MB | {who} | {r.get('status')} ({r.get('total_s')} s) "
                           "| | | | |")
                continue
            out.append(f"| {size} MB | {who} | **{r['total_s']} s** | {r['tensorboard_up_s']} s "
                       f"| {r['run_listed_s']} s | {r['overview_s']} s | {r['operators_s']} s |")
    out += ["", "## Where our cold open goes (the server's timing log)", "",
            "| trace | plugin started at | first scan | pool start | parse | hand-over | "
            "parsed at | table read | analysis | cache write (background) |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size, row in rows["sizes"].items():
        b = (row.get("ours") or {}).get("breakdown")
        if not b:
            continue
        cells = [b.get(k, 0.0) for k in ("plugin_start_at", "first_scan", "pool_start", "parse",
                                          "handover", "parsed_at", "table_read", "analysis",
                                          "cache_write")]
        out.append(f"| {size} MB | " + " | ".join(f"{c} s" for c in cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
