"""Scale of the run-level Distributed view: synthetic runs of 8 to 1024 ranks, cold and cached.

    .venv/bin/python bench/distributed_scale.py [--ranks 8,64,256,1024]

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
    try:
        store.wait_first_scan(600)
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
            time.sleep(0.2)
        seconds = time.perf_counter() - start
        payload = reply.get_json()
    finally:
        store.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(peak, 1),
            "reply_kb": round(len(json.dumps(payload)) / 1024, 1),
            "collectives": payload["collectives"]["total"],
            "heatmap_rows": len(payload["heatmap"]["rows"])}


def _all_loaded(client: Any) -> bool:
    runs = client.get("/runs").get_json()["runs"]
    return all(r["state"] not in ("loading", "queued") for r in runs)


def _child(logdir: Path, cache: Path, run: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--measure", str(logdir), str(cache), run],
                         check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="8,64,256,1024")
    parser.add_argument("--measure", nargs=3, metavar=("LOGDIR", "CACHE", "RUN"))
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return 0
    results = []
    for ranks in (int(r) for r in args.ranks.split(",")):
        logdir = generate(ranks)
        with tempfile.TemporaryDirectory(prefix="dist-scale-cache-") as cache:
            cold = _child(logdir, Path(cache), f"ranks{ranks}")
            cached = _child(logdir, Path(cache), f"ranks{ranks}")
        size = sum(p.stat().st_size for p in logdir.rglob("*.json")) / 1e6
        results.append({"ranks": ranks, "trace_mb": round(size, 1), "cold": cold,
                        "cached": cached})
        print(f"{ranks:5d} ranks ({size:7.1f} MB): cold {cold['seconds']:7.2f} s "
              f"{cold['peak_rss_mb']:6.1f} MB | cached {cached['seconds']:6.2f} s "
              f"{cached['peak_rss_mb']:6.1f} MB | reply {cached['reply_kb']} KB, "
              f"{cached['collectives']} collectives, {cached['heatmap_rows']} heat-map rows",
              flush=True)
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "results.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
