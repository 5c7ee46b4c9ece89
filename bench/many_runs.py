"""Many tiny runs through a real TensorBoard: time until every file is loaded, then idle CPU.

    python bench/many_runs.py [--runs 2000] [--files 10] [--idle 60] [--trace PATH]
                              [--repo PATH]

1. Generate (once, under bench/_work/many_runs/<runs>x<files>/) `runs` run folders of `files`
   worker traces each, every one a copy of one tiny real trace (default: the 2.5 KB gzip CPU
   trace `../shared/traces/cpu_only`, 25 KB of JSON, else the smallest sample), named as
   `tensorboard_trace_handler` names them (`rank<j>.<ts>.pt.trace.json.gz`).
2. Start `python -m tensorboard.main --logdir ...` with an empty torch-prof cache
   ($TORCH_PROF_CACHE_DIR) and PYTHONPATH = `--repo` (default: this checkout; give another
   worktree, e.g. a checkout of an older commit, to measure the old code), and poll `/runs` as
   the UI does (every second) until every run is listed and every span of every worker is in a
   usable state (ok/partial/truncated/empty: parsed) or broken (none is expected here).
   Reported: seconds from the start of TensorBoard to that point, the largest and the mean
   `/runs` reply time, and the server's CPU seconds (its own and its reaped parser processes',
   from /proc/PID/stat) during the load.
3. Then leave it idle (no requests) for `--idle` seconds and report the CPU it used meanwhile
   as a fraction of one core: TensorBoard's own event-file reloader (every 5 s by default)
   included, and once more with `--reload_interval 0` to separate torch-prof's rescans from it
   (`--tb-reload` picks which; default both: two servers, the second on a warm cache).
   `--cache DIR` keeps the cache (e.g. to start the old code, `--repo`, on a warm cache and
   measure its idle rescans alone).

One JSON line per measurement on stdout, and bench/_work/many_runs/results.json. Nothing asserts
timings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / "_work" / "many_runs"
DEFAULT_TRACE = ROOT.parent / "shared" / "traces" / "cpu_only"
PARSED = {"ok", "partial", "truncated", "empty", "error"}
_URL_LINE = re.compile(r"TensorBoard \S+ at (http://\S+?)/? \(Press CTRL\+C")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def tiny_trace(path: Optional[str]) -> Path:
    if path:
        return Path(path)
    found = sorted(DEFAULT_TRACE.glob("*.pt.trace.json*"))
    if found:
        return found[0]
    return min((ROOT / "samples").rglob("*.pt.trace.json*"), key=lambda p: p.stat().st_size)


def generate(runs: int, files: int, trace: Path) -> Path:
    """The logdir of `runs` x `files` copies of `trace` (made once)."""
    logdir = WORK / f"{runs}x{files}"
    done = logdir / ".complete"
    if done.exists():
        return logdir
    if logdir.exists():
        shutil.rmtree(logdir)
    data = trace.read_bytes()
    suffix = ".pt.trace.json.gz" if trace.name.endswith(".gz") else ".pt.trace.json"
    for run in range(runs):
        folder = logdir / f"run{run:05d}"
        folder.mkdir(parents=True)
        for worker in range(files):
            (folder / f"rank{worker}.{1700000000000 + run}{suffix}").write_bytes(data)
    done.write_text("")
    return logdir


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process and of its reaped children (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK


def tree_cpu_seconds(pid: int) -> float:
    """cpu_seconds of the process plus its live children (parser processes still running)."""
    total = cpu_seconds(pid)
    for child in _children(pid):
        with contextlib.suppress(OSError, IndexError):
            total += cpu_seconds(child)
    return total


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _get(url: str) -> tuple[float, Any]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as reply:
        body = json.loads(reply.read())
    return time.perf_counter() - started, body


def _all_loaded(listing: dict[str, Any], runs: int, files: int) -> tuple[bool, int, int]:
    parsed = 0
    for run in listing["runs"]:
        for worker in run["workers"]:
            parsed += sum(span["state"] in PARSED for span in worker["spans"])
    return len(listing["runs"]) == runs and parsed == runs * files, len(listing["runs"]), parsed


def measure(logdir: Path, runs: int, files: int, repo: Path, cache: Path, idle: float,
            reload_interval: Optional[int], timeout: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(repo), "TORCH_PROF_CACHE_DIR": str(cache)}
    args = [sys.executable, "-m", "tensorboard.main", "--port", "0", "--host", "127.0.0.1",
            "--logdir", str(logdir)]
    if reload_interval is not None:
        args += ["--reload_interval", str(reload_interval)]
    log_path = WORK / "tensorboard.log"
    started = time.monotonic()
    with open(log_path, "wb") as log_file:
        popen = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                 cwd=WORK)
    try:
        base = _wait_url(log_path, popen, started + 120)
        url = f"{base}/data/plugin/torch_prof/runs"
        replies: list[float] = []
        progress_at = started
        while True:
            seconds, listing = _get(url)
            replies.append(seconds)
            done, listed, parsed = _all_loaded(listing, runs, files)
            now = time.monotonic()
            if now - progress_at >= 15:
                progress_at = now
                print(f"  [{now - started:6.1f} s] {listed} runs listed, {parsed} files "
                      f"parsed", file=sys.stderr, flush=True)
            if done:
                break
            if now - started > timeout:
                raise RuntimeError(f"not loaded after {timeout} s: {listed} runs, {parsed} "
                                   "files parsed")
            time.sleep(1.0)
        loaded_s = time.monotonic() - started
        load_cpu = tree_cpu_seconds(popen.pid)
        broken = sum(span["state"] == "error" for run in listing["runs"]
                     for worker in run["workers"] for span in worker["spans"])
        result = {"runs": runs, "files": files, "loaded_s": round(loaded_s, 1),
                  "load_cpu_s": round(load_cpu, 1), "broken": broken,
                  "runs_reply_max_s": round(max(replies), 3),
                  "runs_reply_mean_s": round(sum(replies) / len(replies), 3),
                  "polls": len(replies), "reload_interval": reload_interval,
                  "loadavg_at_load": os.getloadavg()[0]}
        if idle > 0:
            time.sleep(5)  # let the last writes and the pool's bookkeeping settle
            before, t0 = tree_cpu_seconds(popen.pid), time.monotonic()
            time.sleep(idle)
            used, span = tree_cpu_seconds(popen.pid) - before, time.monotonic() - t0
            result.update(idle_s=round(span, 1), idle_cpu_s=round(used, 2),
                          idle_core_pct=round(100 * used / span, 2),
                          loadavg_at_idle=os.getloadavg()[0])
        return result
    finally:
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(30)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(10)


def _wait_url(log_path: Path, popen: subprocess.Popen, deadline: float) -> str:
    while time.monotonic() < deadline:
        match = _URL_LINE.search(log_path.read_text(errors="replace"))
        if match:
            return match.group(1)
        if popen.poll() is not None:
            raise RuntimeError(f"TensorBoard exited: {log_path.read_text()[-2000:]}")
        time.sleep(0.2)
    raise RuntimeError("TensorBoard did not start")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--trace", help="the tiny trace to copy (default: shared cpu_only)")
    parser.add_argument("--repo", default=str(ROOT), help="checkout whose tb_plugin is run")
    parser.add_argument("--tb-reload", choices=("default", "off", "both"), default="both",
                        help="TensorBoard's own reloader: default (5 s), off, or both")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--cache", help="torch-prof cache folder to use and keep (default: a "
                        "fresh temporary one): e.g. to start the old code on a warm cache")
    args = parser.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    logdir = generate(args.runs, args.files, tiny_trace(args.trace))
    results = []
    modes = {"default": [None], "off": [0], "both": [None, 0]}[args.tb_reload]
    with tempfile.TemporaryDirectory(prefix="many-runs-cache-") as temporary:
        cache = Path(args.cache or temporary)
        warm = cache.is_dir() and any(cache.iterdir())
        for reload_interval in modes:  # the second one on the first one's cache
            result = measure(logdir, args.runs, args.files, Path(args.repo), cache,
                             args.idle, reload_interval, args.timeout)
            result.update(repo=args.repo, cache="warm" if results or warm else "cold")
            results.append(result)
            print(json.dumps(result), flush=True)
    (WORK / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
