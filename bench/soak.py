"""Bounded soak and cold-load latency of a real TensorBoard (issue 19 items 8 and 10).

    python bench/soak.py soak LOGDIR [--minutes 3] [--threads 4]
    python bench/soak.py cold LOGDIR [--requests 200]
    python bench/soak.py rescan [--files 138000]
    python bench/soak.py huge

`soak` starts TensorBoard with a fresh cache, waits until every file is parsed, then for a fixed
time sends requests whose parameters are all distinct (operator and kernel pies with every
`top_n`, zoomed timelines, searches) from a few threads, and every 15 s prints the server's RSS
(TensorBoard plus its parser processes) and the size and file count of the payload cache. Both
must level off: the payload cache at $TORCH_PROF_PAYLOAD_CACHE_MB per trace file, the RSS at
the table LRU and body LRU budgets.

`cold` starts TensorBoard with a fresh cache and at once sends N concurrent requests (overview
of every worker span, round robin) while it loads, and reports the latency of the first answer
of each (202 or 200): median, p95, max.

`rescan` builds a logdir of N files in 1000 folders (a third `*.json` that are not traces, a
third other files, one trace per folder) and times `discover_runs` on it: the first scan, then
rescans (what the server does every 10 s), in CPU seconds.

`huge` parses files holding one string value of 128, 256 and 512 MB (token limit raised) and
prints the time of each: linear means x2 per doubling (it was x3.5: item 9).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from payload_snapshot import Board

from tb_plugin.discovery import discover_runs
from tb_plugin.load import load_trace


def rss_of_tree(pid: int) -> int:
    """Resident bytes of a process and its descendants (from /proc)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for children in Path(f"/proc/{current}/task").glob("*/children"):
                todo += [int(p) for p in children.read_text().split()]
        except OSError:
            continue
    return total


def payload_cache(cache: Path) -> tuple[int, int]:
    files = list(cache.rglob("payloads/*.json"))
    return sum(f.stat().st_size for f in files if f.exists()), len(files)


def fetch(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=300) as response:
            response.read()
            return response.status
    except urllib.error.HTTPError as error:
        error.read()
        return error.code


def spans_of(board: Board) -> list[dict[str, str]]:
    listing = board.json("/runs")
    return [{"run": run["name"], "worker": worker["name"], "span": span["span"]}
            for run in listing["runs"] for worker in run["workers"] for span in worker["spans"]
            if span["state"] in ("ok", "partial", "truncated")]


def soak(logdir: Path, minutes: float, threads: int, mix: str = "all") -> None:
    with tempfile.TemporaryDirectory() as work:
        board = Board(logdir, Path(work))
        try:
            deadline = time.monotonic() + 600
            while board.json("/runs")["loading"] and time.monotonic() < deadline:
                time.sleep(0.5)
            spans = spans_of(board)
            counter = itertools.count(1)
            stop = threading.Event()
            sent = [0]

            def hammer() -> None:
                while not stop.is_set():
                    n = next(counter)
                    at = spans[n % len(spans)]
                    choices = [
                        ("/operators/pies", {"top_n": n}), ("/kernels/pies", {"top_n": n}),
                        ("/timeline", {"start_us": n, "end_us": n + 1000 + n % 977}),
                        ("/timeline/search", {"q": f"a{n % 5000}"}),
                    ]
                    if mix == "uncached":  # routes whose bodies no LRU keeps
                        choices = choices[2:]
                    route, extra = choices[n % len(choices)]
                    query = urllib.parse.urlencode({**at, **extra})
                    fetch(f"{board.base}{route}?{query}")
                    sent[0] += 1

            workers = [threading.Thread(target=hammer, daemon=True) for _ in range(threads)]
            start = time.monotonic()
            for worker in workers:
                worker.start()
            print(f"{'t (s)':>6} {'requests':>9} {'RSS MB':>8} {'payload MB':>11} {'files':>6}")
            samples = []
            while time.monotonic() - start < minutes * 60:
                size, count = payload_cache(Path(work) / "cache")
                rss = rss_of_tree(board.process.pid)
                samples.append((time.monotonic() - start, sent[0], rss, size, count))
                print(f"{samples[-1][0]:6.0f} {sent[0]:9d} {rss / 2**20:8.1f} "
                      f"{size / 2**20:11.2f} {count:6d}", flush=True)
                time.sleep(15)
            stop.set()
            for worker in workers:
                worker.join(60)
            half = len(samples) // 2
            first, second = samples[half], samples[-1]
            minutes_between = max(1e-9, (second[0] - first[0]) / 60)
            print(json.dumps({
                "requests": sent[0], "spans": len(spans),
                "rss_mb_start": round(samples[0][2] / 2**20, 1),
                "rss_mb_end": round(samples[-1][2] / 2**20, 1),
                "rss_mb_per_min_second_half": round(
                    (second[2] - first[2]) / 2**20 / minutes_between, 2),
                "payload_mb_end": round(samples[-1][3] / 2**20, 2),
                "payload_files_end": samples[-1][4]}))
        finally:
            board.close()


def cold(logdir: Path, requests: int) -> None:
    # the spans are listed by a first server (its cache then discarded), so the cold server
    # can be asked for them the moment it starts
    with tempfile.TemporaryDirectory() as work:
        board = Board(logdir, Path(work))
        try:
            while board.json("/runs")["loading"]:
                time.sleep(0.5)
            spans = spans_of(board)
        finally:
            board.close()
    with tempfile.TemporaryDirectory() as work:
        board = Board(logdir, Path(work))
        try:
            urls = [f"{board.base}/overview?" + urllib.parse.urlencode(spans[i % len(spans)])
                    for i in range(requests)]

            def timed(url: str) -> tuple[float, int]:
                started = time.monotonic()
                status = fetch(url)
                return time.monotonic() - started, status

            with ThreadPoolExecutor(requests) as pool:
                results = list(pool.map(timed, urls))
            latencies = sorted(r[0] * 1000 for r in results)
            statuses: dict[int, int] = {}
            for _, status in results:
                statuses[status] = statuses.get(status, 0) + 1
            print(json.dumps({
                "requests": requests, "statuses": statuses,
                "median_ms": round(statistics.median(latencies), 1),
                "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
                "max_ms": round(latencies[-1], 1)}))
        finally:
            board.close()


def rescan(files: int) -> None:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / "logs"
        per_folder = max(3, files // 1000)
        trace = b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 1}]}'
        for folder in range(files // per_folder):
            run = root / f"run{folder:04d}"
            run.mkdir(parents=True)
            (run / "w.pt.trace.json").write_bytes(trace)
            for i in range(1, per_folder):
                name = f"metrics{i}.json" if i % 2 else f"events{i}.out"
                (run / name).write_bytes(b'{"schemaVersion": 1, "loss": 0.5}')
        timings = []
        for _ in range(4):
            started = time.process_time()
            runs = discover_runs(str(root))
            timings.append(time.process_time() - started)
        print(json.dumps({"files": files, "runs": len(runs),
                          "first_scan_cpu_s": round(timings[0], 2),
                          "rescan_cpu_s": [round(t, 2) for t in timings[1:]],
                          "core_share_at_10s_rescans": round(timings[-1] / 10, 3)}))


def huge() -> None:
    os.environ["TORCH_PROF_MAX_TOKEN_MB"] = "4096"
    results = {}
    with tempfile.TemporaryDirectory() as work:
        for mb in (128, 256, 512):
            path = Path(work) / f"huge{mb}.pt.trace.json"
            with open(path, "wb") as out:
                out.write(b'{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":1},{"name":"')
                block = b"a" * (1 << 20)
                for _ in range(mb):
                    out.write(block)
                out.write(b'","ph":"i","ts":2}]}')
            started = time.perf_counter()
            table = load_trace(str(path), use_cache=False, processes=1)
            results[f"{mb}MB_s"] = round(time.perf_counter() - started, 2)
            assert table.event_count == 2, table.status.messages
            path.unlink()
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("soak", "cold", "rescan", "huge"))
    parser.add_argument("logdir", type=Path, nargs="?")
    parser.add_argument("--files", type=int, default=138_000)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--mix", choices=("all", "uncached"), default="all",
                        help="uncached: only timeline windows and searches (no body LRU)")
    args = parser.parse_args()
    if args.mode == "huge":
        huge()
    elif args.mode == "rescan":
        rescan(args.files)
    elif args.mode == "soak":
        soak(args.logdir.resolve(), args.minutes, args.threads, args.mix)
    else:
        cold(args.logdir.resolve(), args.requests)


if __name__ == "__main__":
    main()
