"""`torch-prof summary LOGDIR`: every run, worker and span with its state and event count.

It parses every file through the executor seam (`executors.py`: local processes, or a Ray
cluster with `--cluster` / $TORCH_PROF_CLUSTER) with one progress bar over the ranks; a file
whose counts the cache holds (`batch.SUMMARY_KEY`, stored by the task) is not loaded again.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, TextIO

from .batch import RankProgress, local_workers, stored_summaries, summarise_files
from .cache import TraceCache
from .cli_common import cache_of
from .discovery import RunInfo, SpanFile, discover_runs
from .executors import make_executor
from .reports import missing_logdir
from .settings import CLUSTER_ENV, available_memory, usable_cpus


def add_parser(commands: Any) -> None:
    summary = commands.add_parser("summary", help="runs, workers, spans, event counts, status")
    summary.add_argument("logdir", help="local folder or fsspec URL (s3://, gs://, ...)")
    summary.add_argument("--json", action="store_true", help="machine-readable output")
    summary.add_argument("--cluster", help="parse on a Ray cluster: ray://HOST:PORT, HOST:PORT "
                         f"or auto (default ${CLUSTER_ENV}); the cache must be shared")
    summary.add_argument("--progress", action="store_true",
                         help="show the progress bar over files also when stderr is no terminal")


def run(args: argparse.Namespace) -> int:
    cache = cache_of(args)
    missing = missing_logdir(args.logdir)
    if missing:
        sys.stderr.write(f"error: {missing}\n")
        return 2
    runs = discover_runs(args.logdir, serve_outside_logdir=cache.config.serve_outside_logdir)
    every = [span.ref for run in runs for spans in run.workers.values() for span in spans]
    if cache.enabled and not cache.writable():  # reported once (by the cache); load without it
        cache = TraceCache(None, cache.config)
    stored = stored_summaries(every, cache)  # files summarised before: no table is loaded
    refs = [ref for ref, counts in zip(every, stored) if counts is None]
    config = replace(cache.config, cluster=args.cluster or cache.config.cluster)
    workers = local_workers(refs, usable_cpus(), available_memory(), config.max_inflate_ratio)
    executor = make_executor(config, max_workers=workers)
    if getattr(executor, "error", None) is not None:  # the cluster is unreachable
        sys.stderr.write(f"error: {executor.error}\n")  # type: ignore[attr-defined]
        return 1
    progress = RankProgress(len(refs), sum(ref.size for ref in refs),
                            enabled=bool(refs) and (args.progress or (
                                not args.json and sys.stderr.isatty())))
    try:
        results = iter(summarise_files(executor, refs, cache.root if cache.enabled else None,
                                       progress, config=cache.config))
    finally:
        executor.shutdown(wait=True)
        progress.close()
    merged = iter([counts if counts is not None else next(results) for counts in stored])
    rows = [_run_row(run, merged) for run in runs]
    if args.json:
        json.dump({"logdir": args.logdir, "runs": rows}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_summary(args.logdir, rows, sys.stdout)
    return 0  # broken workers are reported, not fatal


def _run_row(run: RunInfo, results: Iterator[dict[str, Any]]) -> dict[str, Any]:
    """One run's rows, taking its files' results in discovery order."""
    workers = [{"name": worker, "spans": [_span_summary(span, next(results)) for span in spans]}
               for worker, spans in run.workers.items()]
    return {
        "name": run.name,
        "path": run.path,
        "workers": workers,
        "memory_timelines": [ref.url for ref in run.memory_timelines],
        "memory_snapshots": [ref.url for ref in run.memory_snapshots],
    }


def _span_summary(span: SpanFile, counts: dict[str, Any]) -> dict[str, Any]:
    """A file's row: its name and size, and the counts `batch.summarise_file` returned."""
    return {"span": span.span, "file": span.ref.url, "bytes": span.ref.size, **counts}


def _print_summary(logdir: str, runs: list[dict[str, Any]], out: TextIO) -> None:
    if not runs:
        out.write(f"No runs found under {logdir}.\nRecord traces with torch.profiler's "
                  "tensorboard_trace_handler or tb_plugin.recorder.Recorder.\n")
        return
    for run in runs:
        out.write(f"{run['name']}\n")
        for worker in run["workers"]:
            for span in worker["spans"]:
                out.write(f"  {worker['name']:<32} span {span['span']:<8} "
                          f"{span['state']:<10} {span['events']:>10,} events  "
                          f"{span['bytes'] / 1e6:8.1f} MB\n")
                for message in span["messages"]:
                    out.write(f"      ! {message}\n")
        for timeline in run["memory_timelines"]:
            out.write(f"  memory timeline: {timeline}\n")
        for snapshot in run["memory_snapshots"]:
            out.write(f"  allocator snapshot: {snapshot}\n")
