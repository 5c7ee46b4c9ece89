"""Run one measurement in a fresh child process and collect its JSON result line.

Each measurement gets its own interpreter so that peak RSS is that of one parse of one file,
with nothing left over from a previous size, and so the two plugins never share a process or a
venv. Children print a JSON object as their last stdout line; stderr goes to a log file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchpaths import BENCH, MAIN_PYTHON, OLD_PYTHON, REPO, TMP, WORK
from tracegen import TraceInfo

LOGS = WORK / "logs"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _last_json_line(stdout: str) -> dict[str, Any] | None:
    """The child's result: the last stdout line that parses as a JSON object."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


class TreeRssPoller(threading.Thread):
    """Sample the resident memory of a process tree (and the load) until stopped.

    Ours may parse a big file in two processes; the child's own VmHWM would only see one of
    them. The tree's memory is the root's RSS plus each descendant's private pages (USS, from
    smaps_rollup): a forked helper shares the interpreter, numpy and pandas with its parent,
    and those pages exist once, so they are counted once (summing RSS counted them twice).
    Sampling every 20 ms can miss a very short spike in a worker; the main process's exact
    VmHWM (reported by the child itself) is combined with it.
    """

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_mb = 0.0
        self.max_processes = 0
        self.max_load = 0.0  # 1-minute load average: how contended the 2 cores were meanwhile
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            pids = _process_tree(self.pid)
            total = (_rss_kib(pids[0]) + sum(_private_kib(pid) for pid in pids[1:])) / 1024
            self.peak_mb = max(self.peak_mb, total)
            self.max_processes = max(self.max_processes, len(pids))
            self.max_load = max(self.max_load, os.getloadavg()[0])

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def _process_tree(root: int) -> list[int]:
    """``root`` and its descendants, from /proc/<pid>/task/<tid>/children."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            try:
                todo += [int(c) for c in children.read_text().split()]
            except OSError:
                continue
    return found


def _rss_kib(pid: int) -> int:
    """Resident set of one process (0 if it already exited)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def _private_kib(pid: int) -> int:
    """Pages only this process maps (USS: Private_Clean + Private_Dirty); its RSS if the
    kernel has no smaps_rollup; 0 if it already exited."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            return sum(int(line.split()[1]) for line in fh
                       if line.startswith(("Private_Clean:", "Private_Dirty:")))
    except FileNotFoundError:
        return _rss_kib(pid) if Path(f"/proc/{pid}").exists() else 0
    except (OSError, ValueError, IndexError):
        return _rss_kib(pid)


def run_child(cmd: list[str], env: dict[str, str], log_name: str, timeout: float) -> dict[str, Any]:
    """Run ``cmd``; return its result dict plus wall time and the process tree's peak RSS."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log_path = LOGS / f"{log_name}.log"
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True
        )
        poller = TreeRssPoller(proc.pid)
        poller.start()
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return {"status": "timeout", "wall_s": round(timeout, 1), "measured_at": _now()}
        finally:
            poller.stop()
    wall = round(time.perf_counter() - start, 2)
    result = _last_json_line(stdout)
    if result is None:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-400:]
        result = {"status": "error", "error": f"exit {proc.returncode}, no result line: {tail}"}
    _merge_tree_peak(result, poller)
    result.update(wall_s=wall, measured_at=_now(), log=str(log_path.relative_to(REPO)))
    return result


def _merge_tree_peak(result: dict[str, Any], poller: TreeRssPoller) -> None:
    """peak_rss_mb = max(child's own VmHWM, polled peak of the whole process tree)."""
    result["tree_peak_rss_mb"] = round(poller.peak_mb, 1)
    result["max_processes"] = poller.max_processes
    result["max_load_1m"] = round(poller.max_load, 2)
    if "peak_rss_mb" in result:
        result["self_peak_rss_mb"] = result["peak_rss_mb"]
        result["peak_rss_mb"] = max(result["peak_rss_mb"], result["tree_peak_rss_mb"])


def _base_env() -> dict[str, str]:
    """The caller's environment minus anything that could redirect imports into the other venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONHASHSEED"] = "0"
    return env


def measure_old(trace: TraceInfo, timeout: float) -> dict[str, Any]:
    """torch-tb-profiler 0.4.3's parse + analysis + run generation, in the old venv."""
    cache_dir = TMP / "old-cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(OLD_PYTHON), str(BENCH / "child_old.py"), trace.path, str(cache_dir)]
    return run_child(cmd, _base_env(), f"{trace.size_label}.old", timeout)


def measure_ours(trace: TraceInfo, timeout: float) -> dict[str, Any]:
    """torch-prof's load_trace + build_view, from this checkout, with a throwaway cache home.

    ``use_cache=False`` already disables our cache; pointing ``XDG_CACHE_HOME`` at an empty
    folder makes sure no cache written by an earlier run (or the developer) can be picked up.
    """
    cache_home = TMP / "xdg-cache"
    shutil.rmtree(cache_home, ignore_errors=True)
    cache_home.mkdir(parents=True)
    env = _base_env()
    env.update(PYTHONPATH=str(REPO), XDG_CACHE_HOME=str(cache_home))
    cmd = [str(MAIN_PYTHON), str(BENCH / "child_ours.py"), trace.path]
    return run_child(cmd, env, f"{trace.size_label}.ours", timeout)


def describe(result: dict[str, Any] | None) -> str:
    """One short progress line for a measurement result."""
    if result is None:
        return "skipped"
    status = result.get("status")
    if status != "ok":
        return f"{status}: {result.get('error') or result.get('note') or ''}".strip()
    mode = f" [{result['mode']}]" if result.get("mode") not in (None, "full") else ""
    cpu = f" (CPU {result['cpu_seconds']:.2f} s)" if "cpu_seconds" in result else ""
    return f"{result['seconds']:.2f} s{cpu}, peak RSS {result['peak_rss_mb']:.0f} MB{mode}"


def cleanup_tmp() -> None:
    """Remove per-run scratch (old plugin temp files, throwaway caches)."""
    shutil.rmtree(Path(TMP), ignore_errors=True)
