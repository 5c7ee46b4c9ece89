"""Helpers for the server tests: tiny trace generators and a real TensorBoard subprocess.

The TensorBoard under test is `python -m tensorboard.main` from this interpreter, loading the
plugin through its `tensorboard_plugins` entry point (`pip install -e .` provides it).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from .schema_check import check_reply

SHARED_TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
SAMPLES = Path(__file__).resolve().parents[2] / "samples"
PLUGIN = "torch_prof"
#: Measurements printed at the end of the session (see conftest.py).
TIMINGS: dict[str, Any] = {}
OLD = time.time() - 3600  # mtime of "broken forever" files (not being written)


# -- traces ------------------------------------------------------------------------------------


def make_trace(steps: int = 3, ops_per_step: int = 4, kernels: bool = True,
               base_ts: int = 1_000_000) -> dict[str, Any]:
    """A small valid PyTorch-profiler-like Chrome trace: steps, ops, launches, kernels."""
    events: list[dict[str, Any]] = []
    ts, ext, corr = base_ts, 1, 1
    names = ["aten::conv2d", "aten::relu", "aten::addmm", "aten::add_"]
    for step in range(1, steps + 1):
        step_start = ts
        for i in range(ops_per_step):
            name = names[i % len(names)]
            events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 10, "tid": 10,
                           "ts": ts, "dur": 50,
                           "args": {"External id": ext, "Input Dims": [[2, 3], [3]],
                                    "Input type": ["float", "float"],
                                    "Call stack": f"train.py(12): step;model.py({i}): fwd"}})
            if kernels:
                events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                               "pid": 10, "tid": 10, "ts": ts + 5, "dur": 10,
                               "args": {"correlation": corr, "external id": ext}})
                events.append({"ph": "X", "cat": "kernel", "name": f"{name}_kernel",
                               "pid": 0, "tid": 7, "ts": ts + 20, "dur": 25,
                               "args": {"correlation": corr, "external id": ext, "device": 0,
                                        "stream": 7, "grid": [4, 1, 1], "block": [128, 1, 1],
                                        "registers per thread": 32, "shared memory": 0,
                                        "blocks per SM": 0.05,
                                        "est. achieved occupancy %": 12}})
                corr += 1
            ext += 1
            ts += 60
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 10, "tid": 10, "ts": step_start - 1, "dur": ts - step_start + 2})
        ts += 10
    trace: dict[str, Any] = {"schemaVersion": 1, "traceEvents": events}
    if kernels:
        trace["deviceProperties"] = [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 16 << 30,
                                      "computeMajor": 8, "computeMinor": 0,
                                      "numSms": 80, "maxThreadsPerMultiProcessor": 2048,
                                      "regsPerMultiprocessor": 65536,
                                      "sharedMemPerMultiprocessor": 98304}]
    return trace


def write_trace(path: Path, trace: Optional[dict[str, Any]] = None, *, mtime: Optional[float]
                = None, **kwargs: Any) -> Path:
    data = json.dumps(trace if trace is not None else make_trace(**kwargs)).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")  # written whole, then renamed: never half-seen
    tmp.write_bytes(gzip.compress(data, 1) if path.suffix == ".gz" else data)
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.replace(tmp, path)
    return path


def write_bytes(path: Path, data: bytes, mtime: Optional[float] = OLD) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def truncated_gzip(trace: dict[str, Any], fraction: float = 0.5) -> bytes:
    data = gzip.compress(json.dumps(trace).encode(), 6)
    return data[: int(len(data) * fraction)]


# -- a TensorBoard subprocess ---------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes
    url: str

    def json(self) -> Any:
        return check_reply(self.url, self.status, json.loads(self.body.decode("utf-8")))

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")


@dataclass
class TensorBoard:
    process: subprocess.Popen
    base: str  # http://127.0.0.1:PORT[/prefix]
    log_path: Path
    replies: list[Reply] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def plugin_url(self, route: str, params: Optional[dict[str, Any]] = None) -> str:
        query = "?" + urllib.parse.urlencode(params, doseq=True) if params else ""
        return f"{self.base}/data/plugin/{PLUGIN}/{route}{query}"

    def get(self, route: str, params: Optional[dict[str, Any]] = None, **kwargs: Any) -> Reply:
        return self.fetch(self.plugin_url(route, params), **kwargs)

    def fetch(self, url: str, method: str = "GET", timeout: float = 60) -> Reply:
        request = urllib.request.Request(url, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                reply = Reply(response.status, _headers(response), response.read(), url)
        except urllib.error.HTTPError as error:
            reply = Reply(error.code, _headers(error), error.read(), url)
        with self.lock:
            self.replies.append(reply)
        return reply

    def raw(self, path: str) -> Reply:
        """GET a path exactly as written (no client-side normalisation or quoting)."""
        import http.client

        parsed = urllib.parse.urlsplit(self.base)
        connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        try:
            connection.request("GET", parsed.path + path)
            response = connection.getresponse()
            reply = Reply(response.status, {k.lower(): v for k, v in response.getheaders()},
                          response.read(), path)
        finally:
            connection.close()
        with self.lock:
            self.replies.append(reply)
        return reply

    def wait_for(self, what: str, check: Callable[[], Any], timeout: float = 60,
                 interval: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                     f"log tail:\n{self.log_tail()}")
            if self.process.poll() is not None:
                raise AssertionError(f"TensorBoard exited ({self.process.returncode}):\n"
                                     f"{self.log_tail()}")
            time.sleep(interval)

    def runs(self) -> dict[str, Any]:
        reply = self.get("runs")
        assert reply.status == 200, reply.body
        return reply.json()

    def wait_loaded(self, timeout: float = 120) -> dict[str, Any]:
        def done() -> Optional[dict[str, Any]]:
            listing = self.runs()
            return None if listing["loading"] else listing

        return self.wait_for("all runs loaded", done, timeout, interval=0.25)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 20) -> float:
        """SIGTERM (TensorBoard's graceful exit); returns how long the exit took."""
        started = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
                raise AssertionError(f"TensorBoard ignored SIGTERM for {timeout} s") from None
        return time.monotonic() - started


def _headers(response: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in response.headers.items()}


_URL_LINE = re.compile(r"TensorBoard \S+ at (http://\S+?)/? \(Press CTRL\+C")


def start_tensorboard(logdir: Optional[Path], log_path: Path, env: dict[str, str],
                      *extra: str, timeout: float = 90) -> TensorBoard:
    args = [sys.executable, "-m", "tensorboard.main", "--port", "0", "--host", "127.0.0.1",
            *extra]
    if logdir is not None:
        args += ["--logdir", str(logdir)]
    log_file = open(log_path, "wb")  # noqa: SIM115 (closed with the process)
    process = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                               cwd=str(log_path.parent))
    log_file.close()
    board = TensorBoard(process, "", log_path)

    def started() -> Optional[str]:
        match = _URL_LINE.search(log_path.read_text(errors="replace"))
        return match.group(1) if match else None

    board.base = board.wait_for("TensorBoard to start", started, timeout, interval=0.1)
    return board


def require_entry_point() -> None:
    names = {e.name for e in entry_points(group="tensorboard_plugins")}
    if PLUGIN not in names:
        pytest.fail("the torch_prof entry point is not installed: run `pip install -e .` "
                    "in this environment first")


def copy_shared_runs(logdir: Path) -> list[str]:
    """Copies of the shared real traces (when ../shared exists), with their old mtimes."""
    if not SHARED_TRACES.is_dir():
        return []
    names = []
    for run in sorted(p for p in SHARED_TRACES.iterdir() if p.is_dir()):
        shutil.copytree(run, logdir / run.name, copy_function=shutil.copy2)
        for path in (logdir / run.name).rglob("*"):
            path.chmod(0o644 if path.is_file() else 0o755)
        names.append(run.name)
    return names
