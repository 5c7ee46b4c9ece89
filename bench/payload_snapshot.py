"""Snapshot every HTTP payload the plugin serves, to prove a refactor changed none of them.

    python bench/payload_snapshot.py snap OUT_DIR LOGDIR [LOGDIR ...]
    python bench/payload_snapshot.py compare OLD_DIR NEW_DIR

`snap` starts a real TensorBoard (`--port 0`, a fresh parse/payload cache) on each logdir, waits
until every worker span is parsed, then walks the API the way the frontend does: `/views` of
every run, `/workers?view=V`, `/spans`, and for each worker span every view's routes with a few
option variants (both group-bys, top-N, a zoom window, searches, event ids, every memory device,
the diff against another run and the same run's other span), in JSON and, where a route has a
table, CSV. Each body is written to OUT_DIR and its SHA-256 to OUT_DIR/index.json keyed by the
request. It talks HTTP only, so it runs unchanged against any commit of the plugin: snapshot the
old commit (a `git worktree`) and the new one, then `compare` prints every request whose body
differs or exists on one side only and exits 1 if any does.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

PLUGIN = "data/plugin/torch_prof"
_URL_LINE = re.compile(r"TensorBoard \S+ at (http://\S+?)/? \(Press CTRL\+C")
TABLE_ROUTES = ("/overview", "/operators", "/operators/pies", "/kernels", "/kernels/pies",
                "/timeline/search", "/memory", "/memory/timeline", "/distributed", "/modules",
                "/diff", "/operators/stack")


class Board:
    def __init__(self, logdir: Path, work: Path) -> None:
        env = dict(os.environ, TORCH_PROF_CACHE_DIR=str(work / "cache"))
        self.log = work / "tb.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tensorboard.main", "--port", "0", "--host", "127.0.0.1",
                 "--logdir", str(logdir)], stdout=log, stderr=subprocess.STDOUT, env=env,
                cwd=str(work))
        self.base = self._wait_url()

    def _wait_url(self) -> str:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            match = _URL_LINE.search(self.log.read_text(errors="replace"))
            if match:
                return f"{match.group(1)}/{PLUGIN}"
            if self.process.poll() is not None:
                raise SystemExit(f"TensorBoard exited: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        raise SystemExit("TensorBoard did not start in 120 s")

    def get(self, route: str, **params: Any) -> tuple[int, bytes]:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        url = f"{self.base}{route}" + (f"?{query}" if query else "")
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(url, timeout=120) as response:
                    status, body = response.status, response.read()
            except urllib.error.HTTPError as error:
                status, body = error.code, error.read()
            if status != 202 or time.monotonic() > deadline:
                return status, body
            time.sleep(0.2)

    def json(self, route: str, **params: Any) -> Any:
        status, body = self.get(route, **params)
        return json.loads(body) if status == 200 else None

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def _names(payload: Any, key: str = "name") -> Iterator[str]:
    """Every string under `key` anywhere in a JSON payload, in document order."""
    if isinstance(payload, dict):
        for k, v in payload.items():
            if k == key and isinstance(v, str):
                yield v
            else:
                yield from _names(v, key)
    elif isinstance(payload, list):
        for item in payload:
            yield from _names(item, key)


def _window(payload: Any) -> Optional[tuple[float, float]]:
    """The middle third of a timeline payload's range (for a zoomed request)."""
    if not isinstance(payload, dict):
        return None
    start, end = payload.get("start_us"), payload.get("end_us")
    if not isinstance(start, (int, float)) or not isinstance(end, (int, float)):
        return None
    third = (end - start) / 3
    return start + third, end - third


def requests_of(board: Board, runs: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    for run in runs:
        views = board.json("/views", run=run) or []
        yield "/views", {"run": run}
        for view in views:
            yield "/workers", {"run": run, "view": view}
            workers = board.json("/workers", run=run, view=view) or []
            if view == "Distributed":
                spans = board.json("/spans", run=run, worker=workers[0]) if workers else []
                for span in spans or []:
                    yield "/distributed", {"run": run, "span": span}
                continue
            for worker in workers:
                yield "/spans", {"run": run, "worker": worker}
                spans = board.json("/spans", run=run, worker=worker) or []
                for span in spans:
                    yield from _view_requests(board, runs, view, run, worker, span, spans)


def _view_requests(board: Board, runs: list[str], view: str, run: str, worker: str, span: str,
                   spans: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    at = {"run": run, "worker": worker, "span": span}
    if view == "Overview":
        yield "/overview", at
    elif view == "Operator":
        for group in ("operator", "operator_input_shape"):
            yield "/operators", {**at, "group_by": group}
            yield "/operators/pies", {**at, "group_by": group, "top_n": 5}
            names = list(dict.fromkeys(_names(board.json("/operators", **at, group_by=group))))
            for name in names[:2]:
                yield "/operators/stack", {**at, "group_by": group, "name": name}
        yield "/operators/pies", at
    elif view == "Kernel":
        for group in ("kernel", "kernel_op_launch"):
            yield "/kernels", {**at, "group_by": group}
        yield "/kernels/pies", at
        yield "/kernels/pies", {**at, "top_n": 3}
    elif view == "Trace":
        full = board.json("/timeline", **at)
        yield "/timeline", at
        yield "/timeline", {**at, "width": 640}
        window = _window(full)
        if window:
            yield "/timeline", {**at, "start_us": window[0], "end_us": window[1], "width": 900}
        for query in ("a", "nccl", "ProfilerStep", "zzz-none"):
            yield "/timeline/search", {**at, "q": query}
        yield "/timeline/search", {**at, "q": "e", "limit": 7}
        for event in (0, 1, 17, 400):
            yield "/timeline/event", {**at, "id": event}
    elif view == "Memory":
        memory = board.json("/memory", **at)
        yield "/memory", at
        devices = memory.get("devices", []) if isinstance(memory, dict) else []
        for device in devices if isinstance(devices, list) else []:
            name = device.get("name") if isinstance(device, dict) else device
            if isinstance(name, str):
                yield "/memory", {**at, "device": name}
        yield "/memory/timeline", at
    elif view == "Module":
        yield "/modules", at
    elif view == "Diff":
        for other in spans:
            if other != span:
                exp = {"exp_run": run, "exp_worker": worker, "exp_span": other}
                yield "/diff", {**at, **exp}
                yield "/diff", {**at, **exp, "path": "0-0"}
                yield "/diff", {**at, **exp, "path": "0-1"}
        for other in runs:
            if other != run:
                workers = board.json("/workers", run=other, view="Diff") or []
                exp_spans = board.json("/spans", run=other, worker=workers[0]) if workers else []
                if exp_spans:
                    yield "/diff", {**at, "exp_run": other, "exp_worker": workers[0],
                                    "exp_span": exp_spans[0]}
                break


def _key(route: str, params: dict[str, Any]) -> str:
    return route + "?" + urllib.parse.urlencode(sorted((k, str(v)) for k, v in params.items()))


def _wait_loaded(board: Board) -> list[str]:
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        listing = board.json("/runs")
        runs = listing.get("runs", []) if isinstance(listing, dict) else []
        states = {span.get("state") for run in runs for worker in run.get("workers", [])
                  for span in worker.get("spans", [])}
        if listing is not None and not listing.get("loading") and not states & {"queued",
                                                                                "loading"}:
            return [run["name"] for run in runs]
        time.sleep(0.5)
    raise SystemExit("runs did not finish loading in 900 s")


def snap(out: Path, logdirs: list[Path]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    index: dict[str, str] = {}
    for logdir in logdirs:
        with tempfile.TemporaryDirectory(prefix="payload-snap-") as tmp:
            board = Board(logdir.resolve(), Path(tmp))
            try:
                runs = _wait_loaded(board)
                seen: set[str] = set()
                for route, params in requests_of(board, runs):
                    variants = [params]
                    if route in TABLE_ROUTES:
                        variants.append({**params, "format": "csv"})
                    for variant in variants:
                        key = f"{logdir.name}:{_key(route, variant)}"
                        if key in seen:
                            continue
                        seen.add(key)
                        status, body = board.get(route, **variant)
                        digest = hashlib.sha256(body).hexdigest()
                        index[key] = f"{status}:{digest}"
                        (out / f"{digest}.body").write_bytes(body)
            finally:
                board.close()
        print(f"{logdir}: {sum(k.startswith(logdir.name + ':') for k in index)} requests")
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True))
    return 0


def compare(old: Path, new: Path) -> int:
    a = json.loads((old / "index.json").read_text())
    b = json.loads((new / "index.json").read_text())
    differ = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    for key in differ:
        print(f"{a.get(key, 'absent')[:12]:>12} -> {b.get(key, 'absent')[:12]:<12} {key}")
    print(f"{len(a)} old, {len(b)} new requests; {len(differ)} differ")
    return 1 if differ else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "snap":
        return snap(Path(argv[1]), [Path(p) for p in argv[2:]])
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
