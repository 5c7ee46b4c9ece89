"""Scale of the run-level Distributed view: synthetic runs of 8 to 1024 ranks, cold and cached.

    .venv/bin/python bench/distributed_scale.py [--ranks 8,64,256,1024] [--shape realistic]
        [--modes server,cli]

Shapes: `dlrm` (below) or `realistic` (`tests/support/dist_ranks.realistic`: TP groups of 8,
DP groups across nodes, MoE all-to-alls over the world, 256 collectives and 256 GEMMs per rank,
~350 KB per rank, hostnames, Seq). Modes: `server` (cold and cached, the UI's polling: `/runs`
every 1.5 s beside the view's own retries every second) and `cli` (`report --view distributed`
in a fresh process, cold: empty cache, then cached: every table and rank summary cached).
Wall time and CPU (user + sys of the process and its children) are reported: on this shared
2-core VM the wall time mostly measures the other jobs.

1. Generate (once, under bench/_work/dist_scale/) a run of N ranks from the real 8-rank NCCL
   traces `../shared/traces/param_dlrm_8ranks_nccl`: rank r is worker r % 8 reduced to its step
   markers, communication ops, their launches and NCCL kernels, the first compute kernels and
   CPU ops (small files, ~40 KB), with `distributedInfo` rank r / world size N and its clock
   shifted by 137 us x r (hosts' clocks differ). Every rank has the same collectives, so they
   match across all N ranks.
2. Measure in a fresh process each, through the server's real loading path (`RunStore` with its
   parser-process pool, the `/distributed` route through the plugin's WSGI app): *cold* (empty
   cache: every file parsed by a child, which stores the table and the rank summary) and
   *cached* (a new server on the same cache: only the summaries are read). Reported: wall time
   until the 200 reply, the server process's peak RSS (children excluded: they parse one file
   each and exit with the pool), and the reply's size.
3. Print a table and write bench/_work/dist_scale/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "traces" / "param_dlrm_8ranks_nccl"
WORK = ROOT / "bench" / "_work" / "dist_scale"
COMM_PREFIXES = ("c10d::", "nccl:", "record_param_comms", "ProfilerStep#")
COMPUTE_KEPT = 200  # first compute kernels and CPU ops kept per rank (the overlap chart's work)
CLOCK_SHIFT_US = 137.0


def _reduced(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    events = document["traceEvents"]
    nccl = {e["args"].get("correlation") for e in events
            if e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower()}
    kept, compute = [], 0
    for event in events:
        name, cat = event.get("name", ""), event.get("cat")
        launched = event.get("args", {}).get("correlation") in nccl
        if (event.get("ph") == "M" or name.startswith(COMM_PREFIXES)
                or (cat in ("kernel", "cuda_runtime") and launched)):
            kept.append(event)
        elif cat in ("kernel", "cpu_op") and compute < COMPUTE_KEPT:
            kept.append(event)
            compute += 1
    document["traceEvents"] = kept
    return document


def generate(ranks: int) -> Path:
    """The run folder of `ranks` synthetic rank files (made once)."""
    run = WORK / f"run{ranks}" / f"ranks{ranks}"
    done = run / ".complete"
    if done.exists():
        return run.parent
    run.mkdir(parents=True, exist_ok=True)
    templates = [_reduced(p) for p in sorted(SOURCE.glob("worker*.pt.trace.json"))]
    for rank in range(ranks):
        document = json.loads(json.dumps(templates[rank % len(templates)]))
        document["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": ranks}
        for event in document["traceEvents"]:
            if "ts" in event and event.get("ph") != "M":
                event["ts"] = float(event["ts"]) + CLOCK_SHIFT_US * rank
        (run / f"rank{rank:04d}.pt.trace.json").write_text(json.dumps(document))
    done.write_text("")
    return run.parent


def generate_realistic(ranks: int) -> Path:
    """The run folder of `ranks` realistic generated rank files (made once)."""
    run = WORK / f"real{ranks}" / f"ranks{ranks}"
    done = run / ".complete"
    if done.exists():
        return run.parent
    sys.path.insert(0, str(ROOT))
    from tests.support.dist_ranks import realistic, write_job  # noqa: PLC0415 - bench only

    write_job(realistic(ranks), run)
    done.write_text("")
    return run.parent


def measure(logdir: str, cache: str, run: str) -> dict[str, Any]:
    """In this process: a real RunStore and plugin app; time until /distributed answers 200."""
    sys.path.insert(0, str(ROOT))
    from tensorboard.plugins import base_plugin  # noqa: PLC0415 - bench child only
    from werkzeug.test import Client  # noqa: PLC0415
    from werkzeug.wrappers import Response  # noqa: PLC0415

    from tb_plugin.cache import TraceCache  # noqa: PLC0415
    from tb_plugin.server.plugin import TorchProfPlugin  # noqa: PLC0415
    from tb_plugin.server.store import RunStore  # noqa: PLC0415
    from tb_plugin.settings import Settings  # noqa: PLC0415

    start = time.perf_counter()
    store = RunStore(logdir, cache=TraceCache(Path(cache)), config=Settings())
    store.start()
    context = base_plugin.TBContext(logdir=logdir, multiplexer=None)
    apps = TorchProfPlugin(context, provider=store).get_plugin_apps()
    client = Client(lambda env, start_response: apps[env["PATH_INFO"]](env, start_response),
                    Response)
    stop = threading.Event()

    def ui_polls_runs() -> None:  # the UI's shell: /runs every 1.5 s while something loads
        while not stop.wait(1.5):
            client.get("/runs")

    poller = threading.Thread(target=ui_polls_runs, daemon=True)
    try:
        store.wait_first_scan(600)
        poller.start()
        deadline = time.monotonic() + 3600
        while True:
            reply = client.get(f"/distributed?run={run}&span=default")
            if reply.status_code == 200:
                break
            # 202 while files load; 404 while no loaded file has shown communication yet
            if reply.status_code not in (202, 404) or time.monotonic() > deadline:
                raise RuntimeError(f"{reply.status_code}: {reply.data[:300]!r}; "
                                   f"{client.get('/runs').data[:600]!r}")
            if reply.status_code == 404 and _all_loaded(client):
                raise RuntimeError(f"404 with every file loaded: {reply.data[:300]!r}; "
                                   f"{client.get('/runs').data[:600]!r}")
            time.sleep(1.0)  # the view's retry_after_ms
        seconds = time.perf_counter() - start
        payload = reply.get_json()
    finally:
        stop.set()
        store.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak, 1), "cpu_s": _cpu(),
            "reply_kb": round(len(json.dumps(payload)) / 1024, 1),
            "collectives": payload["collectives"]["total"],
            "heatmap_rows": len(payload["heatmap"]["rows"])}


def _all_loaded(client: Any) -> bool:
    runs = client.get("/runs").get_json()["runs"]
    return all(r["state"] not in ("loading", "queued") for r in runs)


def _cpu() -> float:
    """User + sys seconds of this process and its (waited-for) children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round(own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime, 2)


def cli_report(logdir: Path, cache: Path, run: str) -> dict[str, Any]:
    """`torch-prof report --view distributed` in a fresh process: wall, CPU and peak RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "tb_plugin", "--cache-dir", str(cache), "report",
                          str(logdir), "--run", run, "--view", "distributed", "--format", "json"],
                         check=True, capture_output=True, env={**os.environ,
                                                              "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    payload = json.loads(out.stdout)
    return {"seconds": round(seconds, 2),  # (children's ru_maxrss is the max over all of them)
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                           2), "peak_rss_mb": None,
            "reply_kb": round(len(out.stdout) / 1024, 1),
            "collectives": payload["collectives"]["total"],
            "heatmap_rows": len(payload["heatmap"]["rows"])}


def _child(logdir: Path, cache: Path, run: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--measure", str(logdir), str(cache), run],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="8,64,256,1024")
    parser.add_argument("--shape", choices=("dlrm", "realistic"), default="realistic")
    parser.add_argument("--modes", default="server,cli")
    parser.add_argument("--measure", nargs=3, metavar=("LOGDIR", "CACHE", "RUN"))
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return 0
    results = []
    modes = args.modes.split(",")
    for ranks in (int(r) for r in args.ranks.split(",")):
        logdir = generate_realistic(ranks) if args.shape == "realistic" else generate(ranks)
        run = f"ranks{ranks}"
        size = sum(p.stat().st_size for p in logdir.rglob("*.json")) / 1e6
        entry: dict[str, Any] = {"ranks": ranks, "shape": args.shape, "trace_mb": round(size, 1)}
        for mode in modes:
            with tempfile.TemporaryDirectory(prefix="dist-scale-cache-") as cache:
                measure_one = _child if mode == "server" else cli_report
                cold = measure_one(logdir, Path(cache), run)
                cached = measure_one(logdir, Path(cache), run)
            entry[mode] = {"cold": cold, "cached": cached}
            print(f"{ranks:5d} ranks {args.shape} ({size:7.1f} MB) {mode:6s}: cold "
                  f"{cold['seconds']:7.2f} s ({cold['cpu_s']} CPU s, {cold['peak_rss_mb']} MB) | "
                  f"cached {cached['seconds']:6.2f} s ({cached['cpu_s']} CPU s, "
                  f"{cached['peak_rss_mb']} MB) | reply {cached['reply_kb']} KB, "
                  f"{cached['collectives']} collectives", flush=True)
        results.append(entry)
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / f"results_{args.shape}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
