"""Capture on demand: what the watch costs a training step, and how long from a request to a
span the UI shows. Writes `bench/capture_results.md`; asserts nothing about timings.

    python bench/capture_bench.py [--rounds 7] [--steps 60] [--captures 3]

1. **Watch cost per step** on the CPU sample model (`samples/make_samples.py`'s SmallCNN, batch
   32, one intra-op thread, batches made up front). Rounds alternate a plain loop and the same
   loop with `Recorder(on_demand=True)` listening (default `poll_s` 1 s, no request); the
   median step time of each is compared. The watch's own time is also measured directly: the
   time spent inside `rec.step()` (clock check every step, one stat of the request file per
   second), per step, over the median plain step.
2. **Request to visible span**: a job training that model listens (poll_s 1 s), a real
   TensorBoard with TORCH_PROF_ALLOW_CAPTURE=1 serves its logdir; `POST /capture` (5 steps),
   then `/capture/status` (every 50 ms) until accepted and written, `/runs` (every 100 ms)
   until the span is listed, and the Operator view until it answers 200.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RESULTS = REPO / "bench" / "capture_results.md"

JOB = textwrap.dedent(
    """
    import os, sys, time
    import torch
    from torch import nn
    from samples.make_samples import SmallCNN
    from tb_plugin.recorder import Recorder

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))
    with Recorder(sys.argv[1], run="job", on_demand=True) as rec:
        while not os.path.exists(sys.argv[2]):
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step()
    """
)


def step_cost(rounds: int, steps: int) -> dict[str, Any]:
    import torch
    from torch import nn

    from samples.make_samples import SmallCNN
    from tb_plugin.recorder import Recorder

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))

    def train_step() -> None:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(20):  # warm-up
        train_step()
    plain: list[float] = []
    watched: list[float] = []
    inside: list[float] = []
    with tempfile.TemporaryDirectory() as logdir:
        rec = Recorder(logdir, run="bench", on_demand=True)
        rec.start()
        for round_no in range(rounds):
            for mode in (("plain", "watched") if round_no % 2 == 0 else ("watched", "plain")):
                for _ in range(steps):
                    start = time.perf_counter_ns()
                    train_step()
                    if mode == "watched":
                        before = time.perf_counter_ns()
                        rec.step()
                        inside.append(time.perf_counter_ns() - before)
                    (plain if mode == "plain" else watched).append(
                        time.perf_counter_ns() - start)
        rec.stop()
    median_plain, median_watched = statistics.median(plain), statistics.median(watched)
    return {
        "steps_each": len(plain),
        "median_plain_ms": median_plain / 1e6,
        "median_watched_ms": median_watched / 1e6,
        "difference_pct": 100 * (median_watched - median_plain) / median_plain,
        "watch_mean_us": statistics.fmean(inside) / 1e3,
        "watch_median_us": statistics.median(inside) / 1e3,
        "watch_max_us": max(inside) / 1e3,
        "watch_pct_of_step": 100 * statistics.fmean(inside) / median_plain,
    }


def _get(url: str, data: bytes | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, None


def _poll(what: str, probe: Any, interval: float, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} did not happen in {timeout} s")


def request_to_span(captures: int) -> list[dict[str, float]]:
    work = Path(tempfile.mkdtemp(prefix="capture-bench-"))
    logdir, stop = work / "logs", work / "stop"
    (work / "job.py").write_text(JOB)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCH_PROF_ALLOW_CAPTURE": "1",
           "TORCH_PROF_CACHE_DIR": str(work / "cache")}
    job = subprocess.Popen([sys.executable, str(work / "job.py"), str(logdir), str(stop)],
                           env=env, cwd=REPO, stderr=subprocess.DEVNULL)
    log = open(work / "tb.log", "wb")  # noqa: SIM115 - open for the server's lifetime
    board = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--port", "0",
                              "--host", "127.0.0.1", "--logdir", str(logdir)],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    timings = []
    try:
        base = _poll("TensorBoard's address", lambda: re.search(
            r"at (http://\S+?)/? \(Press", (work / "tb.log").read_text()), 0.2).group(1)
        api = f"{base}/data/plugin/torch_prof"
        _poll("the job listening", lambda: _get(f"{api}/capture/targets")[1]["runs"], 0.2)
        for number in range(1, captures + 1):
            start = time.monotonic()
            code, accepted = _get(f"{api}/capture", json.dumps(
                {"run": "job", "steps": 5}).encode())
            assert code == 200, code
            status_url = f"{api}/capture/status?id={accepted['id']}"
            _poll("accepted", lambda url=status_url: _get(url)[1]["workers"], 0.05)
            t_accepted = time.monotonic() - start
            done = _poll("written", lambda url=status_url: (
                lambda s: s if s["done"] else None)(_get(url)[1]), 0.05)
            t_written = time.monotonic() - start
            worker = done["workers"][0]["worker"]

            def listed(n: int = number, w: str = worker) -> bool:
                runs = {r["name"]: r for r in _get(f"{api}/runs")[1]["runs"]}
                workers = {x["name"]: x for x in runs.get("job", {}).get("workers", [])}
                return len(workers.get(w, {}).get("spans", [])) >= n

            _poll("the span listed", listed, 0.1)
            t_listed = time.monotonic() - start
            view = f"{api}/operators?run=job&worker={worker}&span={number}"
            _poll("the operator view", lambda url=view: _get(url)[0] == 200, 0.1)
            timings.append({"accepted_s": t_accepted, "written_s": t_written,
                            "listed_s": t_listed, "view_s": time.monotonic() - start})
    finally:
        stop.touch()
        job.wait(60)
        board.send_signal(signal.SIGTERM)
        board.wait(30)
        log.close()
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--captures", type=int, default=3)
    args = parser.parse_args()
    cost = step_cost(args.rounds, args.steps)
    print(json.dumps(cost, indent=1))
    spans = request_to_span(args.captures)
    print(json.dumps(spans, indent=1))
    write_results(cost, spans, args)
    return 0


def write_results(cost: dict[str, Any], spans: list[dict[str, float]], args: Any) -> None:
    import torch

    median = {key: statistics.median(t[key] for t in spans) for key in spans[0]}
    lines = [
        "# Capture on demand: bench/capture_bench.py",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {platform.machine()}, "
        f"{os.cpu_count()} CPUs (shared), Python {platform.python_version()}, torch "
        f"{torch.__version__}; `python bench/capture_bench.py --rounds {args.rounds} --steps "
        f"{args.steps} --captures {args.captures}`.",
        "",
        "## The watch's cost per step (SmallCNN, batch 32, CPU, 1 thread; poll_s 1 s)",
        "",
        "| measure | value |",
        "|---|---|",
        f"| steps per mode | {cost['steps_each']} |",
        f"| median step, plain loop | {cost['median_plain_ms']:.2f} ms |",
        f"| median step, on-demand recorder listening | {cost['median_watched_ms']:.2f} ms |",
        f"| difference of the medians (noise included) | {cost['difference_pct']:+.2f} % |",
        f"| time inside `rec.step()`: mean / median / max | {cost['watch_mean_us']:.1f} / "
        f"{cost['watch_median_us']:.1f} / {cost['watch_max_us']:.1f} us |",
        f"| **watch time per step over the plain step** | **{cost['watch_pct_of_step']:.3f} %**"
        " (target < 1 %) |",
        "",
        "## Request to visible span (POST /capture, 5 steps, job poll_s 1 s)",
        "",
        "Seconds from the POST; median of "
        f"{len(spans)} captures (each: " + "; ".join(
            f"{t['accepted_s']:.2f}/{t['written_s']:.2f}/{t['listed_s']:.2f}/{t['view_s']:.2f}"
            for t in spans) + ").",
        "",
        "| accepted by the job | trace written | span in `/runs` | Operator view 200 |",
        "|---|---|---|---|",
        f"| {median['accepted_s']:.2f} s | {median['written_s']:.2f} s | "
        f"{median['listed_s']:.2f} s | {median['view_s']:.2f} s |",
        "",
        "Accepted: up to `poll_s` (1 s) plus a step. Written: + one warm-up step and 5 recorded "
        "steps, the export and gzip. Listed: `/runs` polling asks for a rescan at most every "
        "3 s (`catalog.MIN_RESCAN_GAP_S`). View: the parse of the new file.",
        "",
    ]
    RESULTS.write_text("\n".join(lines))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    sys.exit(main())
