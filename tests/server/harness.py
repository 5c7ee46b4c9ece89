"""Helpers for the server tests: tiny trace generators and a real TensorBoard subprocess.

The TensorBoard under test is `python -m tensorboard.main` from this interpreter, loading the
plugin through its `tensorboard_plugins` entry point (`pip install -e .` provides it).
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

from tests.support import SAMPLES, SHARED_TRACES, launcher

from .schema_check import check_reply

PLUGIN = "torch_prof"
#: Measurements printed at the end of the session (see conftest.py).
TIMINGS: dict[str, Any] = {}
OLD = time.time() - 3600  # mtime of "broken forever" files (not being written)
ERROR_KEYS = {"code", "message"}


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
    """HTTP helpers around a TensorBoard started by tests/support/launcher.py."""

    launched: launcher.Process
    replies: list[Reply] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def process(self) -> subprocess.Popen:
        return self.launched.popen

    @property
    def base(self) -> str:  # http://127.0.0.1:PORT[/prefix]
        return self.launched.base

    def plugin_url(self, route: str, params: Optional[dict[str, Any]] = None) -> str:
        query = "?" + urllib.parse.urlencode(params, doseq=True) if params else ""
        return f"{self.base}/data/plugin/{PLUGIN}/{route}{query}"

    def get(self, route: str, params: Optional[dict[str, Any]] = None, **kwargs: Any) -> Reply:
        return self.fetch(self.plugin_url(route, params), **kwargs)

    def post(self, route: str, body: bytes, content_type: str = "application/json") -> Reply:
        return self.fetch(self.plugin_url(route), "POST", data=body,
                          headers={"Content-Type": content_type})

    def fetch(self, url: str, method: str = "GET", timeout: float = 60,
              data: Optional[bytes] = None, headers: Optional[dict[str, str]] = None) -> Reply:
        request = urllib.request.Request(url, method=method, data=data, headers=headers or {})
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
        """Poll `check` until it returns something true (an observable state, not a delay)."""
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
        return self.launched.log_tail(lines)

    def stop(self, timeout: float = 20) -> float:
        """SIGTERM (TensorBoard's graceful exit); returns how long the exit took."""
        return self.launched.stop(timeout)


def _headers(response: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in response.headers.items()}


def start_tensorboard(logdir: Optional[Path], log_path: Path, env: dict[str, str],
                      *extra: str, timeout: float = 90) -> TensorBoard:
    return TensorBoard(launcher.start(logdir, log_path, env, *extra, timeout=timeout))


@contextlib.contextmanager
def running_tensorboard(logdir: Optional[Path], log_path: Path, env: dict[str, str],
                        *extra: str) -> Iterator[TensorBoard]:
    """A TensorBoard for one `with` block, stopped with SIGTERM when it ends."""
    with launcher.running(logdir, log_path, env, *extra) as launched:
        yield TensorBoard(launched)


def assert_error(reply: Reply, status: int) -> dict[str, Any]:
    """`reply` is the plugin's JSON error envelope with this status (and no traceback)."""
    assert reply.status == status, (reply.url, reply.status, reply.body[:300])
    assert reply.header("content-type").startswith("application/json"), reply.headers
    body = reply.json()
    assert set(body["error"]) >= ERROR_KEYS, body
    assert body["error"]["code"] == status and body["error"]["message"], body
    assert "Traceback" not in reply.body.decode(), reply.body
    return body["error"]


# -- logdirs -----------------------------------------------------------------------------------

#: Sample runs copied into the server logdirs (see samples/README.md).
SAMPLE_RUNS = ("cnn_bs32", "cnn_bs64", "ddp_gloo")


def generated_runs(root: Path) -> None:
    """Small generated runs (GPU, CPU-only, one big, broken files, a nested name)."""
    gpu = root / "gen_gpu"
    write_trace(gpu / "w0.1700000000001.pt.trace.json", steps=3, mtime=OLD)
    write_trace(gpu / "w0.1700000000002.pt.trace.json.gz", steps=4, mtime=OLD)
    write_trace(gpu / "w0.1700000000010.pt.trace.json", steps=2, mtime=OLD)
    write_trace(gpu / "w1.pt.trace.json", steps=2, mtime=OLD)
    for i in range(1, 11):  # spans 1..10 must come back in numeric order
        write_trace(gpu / f"w2.{1700000000000 + i}.pt.trace.json", steps=1, ops_per_step=1,
                    mtime=OLD)
    write_trace(root / "gen_cpu" / "cpu.pt.trace.json", kernels=False, mtime=OLD)
    write_trace(root / "gen_big" / "big.pt.trace.json", steps=250, ops_per_step=100, mtime=OLD)
    mixed = root / "mixed"
    write_trace(mixed / "good.pt.trace.json", mtime=OLD)
    write_bytes(mixed / "trunc.pt.trace.json.gz", truncated_gzip(make_trace(steps=40), 0.6))
    write_bytes(mixed / "badjson.pt.trace.json", b"this is { not json")
    write_bytes(mixed / "empty.pt.trace.json", b"")
    write_trace(root / "nested" / "deep run \u00fc" / "w.pt.trace.json", mtime=OLD)


def sample_runs(root: Path) -> None:
    """samples/ runs, plus two variants: `ddp_broken` (ddp_gloo's rank 0, and a rank 2 whose
    only file is broken) and `export_only` (one memory-timeline export, no trace)."""
    for name in SAMPLE_RUNS:
        _copy(SAMPLES / name, root / name)
    broken = root / "ddp_broken"
    for path in sorted((SAMPLES / "ddp_gloo").glob("*rank0*")):
        _copy(path, broken / path.name)
    write_bytes(broken / "vm_9999_rank2.1795260318969.pt.trace.json.gz", b"\x1f\x8b broken")
    export = sorted((SAMPLES / "cnn_bs32").glob("*.raw.json.gz"))[0]
    _copy(export, root / "export_only" / "memory.raw.json.gz")


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, copy_function=shutil.copy2)
        for path in target.rglob("*"):
            path.chmod(0o644 if path.is_file() else 0o755)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
    target.chmod(0o644)


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
