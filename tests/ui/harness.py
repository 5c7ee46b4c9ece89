"""Harness of the browser tests of the plugin UI: a real TensorBoard, Debian chromium,
Playwright for Python.

The log dir is built once per session in a temp folder:

* the sample runs in ``samples/`` that exist (``cnn_bs32``, ``cnn_bs64``, ``ddp_gloo``);
* a few real traces from ``../shared/traces`` when that folder exists (GPU kernels, CPU only);
* ``broken_worker``: one good worker plus a worker whose file is not a trace, and one whose
  file is cut off in the middle of an event;
* ``many_ops``: a synthetic trace with 100k distinct operators (virtualised table).

Every page records each request it makes; a test fails if one leaves 127.0.0.1.
Screenshots go to tests/_artifacts/ (gitignored).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

from tests.support import REPO, SAMPLES, SHARED_TRACES, launcher

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

ARTIFACTS = REPO / "tests" / "_artifacts"
SAMPLE_RUNS = ("cnn_bs32", "cnn_bs64", "ddp_gloo")
SHARED_RUNS = ("resnet50_gpu_pt19", "cpu_only", "triton_kernels", "tl_vllm_decode_fullgraph",
               "tl_sglang_prefilldecode")
#: torch.compile runs (test_compiled_view.py): a CPU sample and a real MI300X Triton trace.
COMPILED_RUNS = ((SAMPLES, "compiled_cpu"), (SHARED_TRACES, "tl_mi300_torch_compile_triton"))
PLUGIN = "torch_prof"
MANY_OPS = 100_000
STARTUP_TIMEOUT_S = 90
LOAD_TIMEOUT_S = 180


# -- log dir -------------------------------------------------------------------------------


def _write_many_ops(path: Path, count: int) -> None:
    """One step of `count` back-to-back CPU ops, each with its own name (=> `count` table rows)."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": count * 3 + 10},
    ]
    for i in range(count):
        events.append({"ph": "X", "cat": "cpu_op", "name": f"aten::synthetic_{i:06d}",
                       "pid": 1, "tid": 1, "ts": 5 + i * 3, "dur": 1 + (i * 7919) % 2,
                       "args": {"External id": i + 1}})
    trace = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}
    with gzip.open(path, "wt", compresslevel=1) as handle:
        json.dump(trace, handle, separators=(",", ":"))


def build_logdir(root: Path) -> dict[str, Any]:
    runs: list[str] = []
    for name in SAMPLE_RUNS:
        src = SAMPLES / name
        if src.is_dir() and any(src.glob("*.pt.trace.json*")):
            shutil.copytree(src, root / name)
            runs.append(name)
    shared = []
    for name in SHARED_RUNS:
        src = SHARED_TRACES / name
        if src.is_dir():
            shutil.copytree(src, root / name)
            shared.append(name)
            if (src / "capture").is_dir():  # its graph capture, a run of its own
                shared.append(f"{name}/capture")
    compiled = []
    for base, name in COMPILED_RUNS:
        if (base / name).is_dir():
            shutil.copytree(base / name, root / name)
            compiled.append(name)
    broken = root / "broken_worker"
    broken.mkdir()
    good_source = next((SAMPLES / r for r in runs), None)
    if good_source is not None:
        first = sorted(good_source.glob("*.pt.trace.json*"))[0]
        worker = first.name.split(".")[0]
        shutil.copy(first, broken / f"good{first.name[len(worker):]}")
    (broken / "bad_worker.1700000000000.pt.trace.json").write_text("this is not a trace at all\n")
    (broken / "cut_worker.1700000000000.pt.trace.json").write_text(
        '{"schemaVersion": 1, "traceEvents": ['
        '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, '
        '"ts": 0, "dur": 100}, '
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, '
        '"dur": 50}, {"ph": "X", "cat": "cpu_op", "na'
    )
    (root / "many_ops").mkdir()
    _write_many_ops(root / "many_ops" / "synthetic.1700000000000.pt.trace.json.gz", MANY_OPS)
    return {"samples": runs, "shared": shared, "compiled": compiled}


# -- TensorBoard ---------------------------------------------------------------------------


class TensorBoard:
    def __init__(self, url: str, logdir: Path, runs: dict[str, Any], log_path: Path) -> None:
        self.url = url
        self.logdir = logdir
        self.runs = runs
        self.log_path = log_path

    @property
    def api_base(self) -> str:
        return f"{self.url}/data/plugin/{PLUGIN}/"

    @property
    def entry(self) -> str:
        """The plugin's own iframe document, as TensorBoard serves it."""
        return f"{self.url}/data/plugin_entry.html?name={PLUGIN}"

    def get(self, route: str, **params: Any) -> tuple[int, bytes, str]:
        query = urlencode({k: v for k, v in params.items() if v is not None})
        url = self.api_base + route + (f"?{query}" if query else "")
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                return resp.status, resp.read(), resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as err:
            return err.code, err.read(), err.headers.get("Content-Type", "")

    def api(self, route: str, **params: Any) -> Any:
        """JSON of a route, waiting through 202 (worker still loading)."""
        deadline = time.time() + LOAD_TIMEOUT_S
        while True:
            status, body, _ = self.get(route, **params)
            if status == 202 and time.time() < deadline:
                time.sleep(0.5)
                continue
            assert status == 200, f"{route} {params}: HTTP {status} {body[:300]!r}"
            return json.loads(body)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""


def wait_ready(tb: TensorBoard, proc: subprocess.Popen) -> None:
    deadline = time.time() + STARTUP_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"TensorBoard exited ({proc.returncode}):\n{tb.log_tail()}")
        try:
            status, body, _ = tb.get("runs")
            if status == 200 and json.loads(body).get("runs") is not None:
                break
        except (OSError, ValueError):
            pass
        if time.time() > deadline:
            raise RuntimeError(f"TensorBoard did not serve the plugin:\n{tb.log_tail()}")
        time.sleep(0.5)
    # Then wait until every run has finished loading (small files: seconds).
    deadline = time.time() + LOAD_TIMEOUT_S
    while time.time() < deadline:
        data = json.loads(tb.get("runs")[1])
        if not data.get("loading") and all(r.get("state") != "loading" for r in data["runs"]):
            return
        time.sleep(0.5)
    raise RuntimeError(f"runs still loading after {LOAD_TIMEOUT_S}s:\n{tb.log_tail()}")



class RequestLog:
    def __init__(self) -> None:
        self.urls: list[str] = []

    def record(self, request: Any) -> None:
        self.urls.append(request.url)

    def outside(self) -> list[str]:
        """Requests that left 127.0.0.1 (data: URLs stay in the page and are fine)."""
        bad = []
        for url in self.urls:
            parsed = urlparse(url)
            if parsed.scheme in ("data", "about", "blob"):
                bad += [url] if parsed.scheme == "blob" else []
                continue
            if parsed.hostname != "127.0.0.1":
                bad.append(url)
        return bad


def new_page(browser: Any, scheme: str, requests: RequestLog, width: int = 1440,
              height: int = 1000) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": height},
                                  color_scheme=scheme, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("request", requests.record)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return context, page, errors


@contextlib.contextmanager
def running_tensorboard(root: Path, logdir: Path, runs: dict[str, Any],
                        repo_first: bool = False) -> Iterator[TensorBoard]:
    """A real `tensorboard --logdir` (tests/support/launcher.py: `--port 0`) with its own
    cache, stopped with SIGTERM afterwards.

    `repo_first` puts this checkout first on PYTHONPATH, so a git worktree's plugin (not the
    one the venv's editable install points at) is what TensorBoard loads.
    """
    cache = root / "cache"
    cache.mkdir(exist_ok=True)
    env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
    if repo_first:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    log_path = root / "tensorboard.log"
    with launcher.running(logdir, log_path, env, timeout=STARTUP_TIMEOUT_S) as process:
        tb = TensorBoard(process.base, logdir, runs, log_path)
        wait_ready(tb, process.popen)
        yield tb
