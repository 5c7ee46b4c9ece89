"""1024 synthetic ranks (small files): summarise them through the local process pool and through
Ray with 2 local workers; wall time and the driver's peak RSS, each mode in a fresh process.
Also the per-file parse cost on one bigger synthetic rank (MB/s in one process) and the
cache's size per JSON byte, the inputs of the README's cluster-size projection.

    python bench/cluster_bench.py [--ranks 1024] [--big-mb 100] [--out bench/cluster_results.md]

Nothing asserts timings; the numbers go to stdout and to the --out file.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tensorboard.plugins import base_plugin  # noqa: E402
from werkzeug.test import Client  # noqa: E402
from werkzeug.wrappers import Response  # noqa: E402

from tb_plugin.batch import summarise_files  # noqa: E402
from tb_plugin.cache import TraceCache  # noqa: E402
from tb_plugin.discovery import discover_runs  # noqa: E402
from tb_plugin.executors import RayExecutor, make_executor  # noqa: E402
from tb_plugin.load import load_trace  # noqa: E402
from tb_plugin.server.plugin import TorchProfPlugin  # noqa: E402
from tb_plugin.server.pool import LoadPool  # noqa: E402
from tb_plugin.server.store import RunStore  # noqa: E402
from tb_plugin.settings import Settings, settings  # noqa: E402
from tb_plugin.storage import open_ref  # noqa: E402
from tests.cluster.ranks import write_rank, write_run  # noqa: E402


def child(mode: str, logdir: str, cache: str) -> None:
    """One measurement, in this fresh process; prints one JSON line."""
    refs = [s.ref for run in discover_runs(logdir) for spans in run.workers.values()
            for s in spans]
    started = time.perf_counter()
    init_s = 0.0
    if mode.startswith("server"):
        return server_child(mode, logdir, cache, len(refs))
    if mode == "ray":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _temp_dir=tempfile.mkdtemp(prefix="tp-ray-"))
        init_s = time.perf_counter() - started
        executor = RayExecutor("auto")
    else:
        executor = make_executor(settings(), max_workers=2)
    begin = time.perf_counter()
    rows = summarise_files(executor, refs, cache)
    work_s = time.perf_counter() - begin
    executor.shutdown(wait=True)
    print(json.dumps({
        "mode": mode, "files": len(rows), "events": sum(r["events"] for r in rows),
        "errors": sum(r["state"] == "error" for r in rows), "init_s": round(init_s, 2),
        "work_s": round(work_s, 2), "wall_s": round(time.perf_counter() - started, 2),
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "pyarrow_loaded": "pyarrow" in sys.modules,
    }))


def server_child(mode: str, logdir: str, cache: str, files: int) -> None:
    """The server's side: a RunStore whose LoadPool runs locally (2 processes) or on Ray (2
    local workers) until every file's outcome is in; wall time and the server's peak RSS."""
    started = time.perf_counter()
    init_s = 0.0
    if mode == "server-ray":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _temp_dir=tempfile.mkdtemp(prefix="tp-ray-"))
        init_s = time.perf_counter() - started
    config = Settings(cluster="auto") if mode == "server-ray" else Settings(load_workers=2)
    done, outcomes = threading.Event(), []

    def pool(root, on_start, on_progress, on_done):
        def record(outcome):
            on_done(outcome)
            outcomes.append(outcome)
            if len(outcomes) >= files:
                done.set()
        return LoadPool(root, on_start, on_progress, record, config=config)

    begin = time.perf_counter()
    store = RunStore(logdir, cache=TraceCache(cache), config=config, pool_factory=pool)
    store.start()
    assert done.wait(3600)
    work_s = time.perf_counter() - begin
    if mode == "server-ray":  # the run-level view from the summaries only: no table to read
        for path in Path(cache.removeprefix("file://")).rglob("columns.npz"):
            path.unlink()
    context = base_plugin.TBContext(logdir=logdir, flags=argparse.Namespace(
        logdir=logdir, logdir_spec=""))
    apps = TorchProfPlugin(context, provider=store).get_plugin_apps()
    client = Client(lambda env, start: apps[env["PATH_INFO"]](env, start), Response)
    begin = time.perf_counter()
    reply = client.get("/distributed?run=job&span=1")
    distributed_s = time.perf_counter() - begin
    assert reply.status_code == 200, reply.data[:300]
    store.close()
    print(json.dumps({
        "mode": mode, "files": len(outcomes), "events": sum(
            (o.summary or {}).get("events", 0) for o in outcomes),
        "errors": sum(o.error is not None for o in outcomes), "init_s": round(init_s, 2),
        "work_s": round(work_s, 2), "wall_s": round(time.perf_counter() - started, 2),
        "distributed_view_s": round(distributed_s, 2),
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "pyarrow_loaded": "pyarrow" in sys.modules,
    }))


def parse_cost(path: str, cache: str) -> None:
    """Parse one file in one process, then store it in a cache: seconds, MB/s, cache bytes."""
    ref = open_ref(path)
    begin = time.perf_counter()
    table = load_trace(ref, use_cache=False, processes=1)
    parse_s = time.perf_counter() - begin
    begin = time.perf_counter()
    TraceCache(cache).save_table(ref, table)
    save_s = time.perf_counter() - begin
    stored = sum(p.stat().st_size for p in Path(cache.removeprefix("file://")).rglob("*")
                 if p.is_file())
    print(json.dumps({"mb": round(ref.size / 1e6, 1), "events": int(table.event_count),
                      "parse_s": round(parse_s, 2), "mb_per_s": round(ref.size / 1e6 / parse_s, 1),
                      "save_s": round(save_s, 2), "cache_per_json_byte":
                      round(stored / ref.size, 3)}))


def _run(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True,
                         text=True, cwd=REPO).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--out", default=str(REPO / "bench" / "cluster_results.md"))
    parser.add_argument("--child", nargs=3, metavar=("MODE", "LOGDIR", "CACHE"))
    parser.add_argument("--parse-cost", nargs=2, metavar=("PATH", "CACHE"))
    parser.add_argument("--modes", default="local,ray,server-local,server-ray")
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    if args.parse_cost:
        return parse_cost(*args.parse_cost)
    work = Path(tempfile.mkdtemp(prefix="tp-cluster-bench-"))
    try:
        write_run(work / "logs", args.ranks)
        size = sum(p.stat().st_size for p in (work / "logs").rglob("*.json"))
        rows = []
        for mode in args.modes.split(","):
            rows.append(_run("--child", mode, str(work / "logs"), f"file://{work / f'c-{mode}'}"))
            print(rows[-1], flush=True)
        steps = max(1, int(args.big_mb * 1e6 / 3600))  # ~3.6 KB of JSON per step (16 events)
        (work / "big").mkdir()
        big = write_rank(work / "big", 0, 1, steps=steps)
        cost = _run("--parse-cost", str(big), f"file://{work / 'cache-big'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        f"# Cluster benchmark ({time.strftime('%Y-%m-%d')}, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()})",
        "",
        f"{args.ranks} synthetic ranks, {size / 1e6:.1f} MB of JSON in all, cold file:// cache, "
        "2 workers in both modes.",
        "",
        "CLI `summary` (local, ray) and the server's RunStore/LoadPool (server-*), until every "
        "file is summarised; RSS is the driver's (CLI or server) own peak.",
        "",
        "| mode | files | errors | init s | work s | wall s | driver peak RSS MB | pyarrow |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
        *(f"| {r['mode']} | {r['files']} | {r['errors']} | {r['init_s']} | {r['work_s']} | "
          f"{r['wall_s']} | {r['driver_peak_rss_mb']} | {r['pyarrow_loaded']} |" for r in rows),
        "",
        *(f"Distributed view of the {args.ranks}-rank run, first request ({r['mode']}"
          f"{', every table deleted from the cache first' if r['mode'] == 'server-ray' else ''}"
          f"): {r['distributed_view_s']} s." for r in rows if "distributed_view_s" in r),
        "",
        f"Per-file cost, one process: {cost['mb']} MB synthetic rank, {cost['events']:,} events: "
        f"parse {cost['parse_s']} s ({cost['mb_per_s']} MB/s), cache write {cost['save_s']} s, "
        f"cache {cost['cache_per_json_byte']} bytes per JSON byte.",
    ]
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
