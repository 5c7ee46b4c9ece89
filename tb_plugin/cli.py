"""Command line: `python -m tb_plugin summary LOGDIR` and `python -m tb_plugin report LOGDIR ...`.

`report` prints exactly the payloads the server returns, so every view can be checked (and
scripted) without a browser.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional, TextIO

from .cache import TraceCache, default_cache, default_cache_dir
from .discovery import RunInfo, SpanFile, discover_runs
from .ingest import TraceTable, load_trace


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    cache = _cache(args)
    if args.command == "summary":
        return _summary(args, cache)
    return _report(args, cache)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tb_plugin", description=__doc__)
    parser.add_argument("--cache-dir", help=f"parsed-trace cache (default {default_cache_dir()})")
    parser.add_argument("--no-cache", action="store_true", help="always parse from scratch")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="runs, workers, spans, event counts, status")
    summary.add_argument("logdir", help="local folder or fsspec URL (s3://, gs://, ...)")
    summary.add_argument("--json", action="store_true", help="machine-readable output")
    report = commands.add_parser("report", help="print one view's payload")
    report.add_argument("logdir")
    report.add_argument("--run", required=True)
    report.add_argument("--worker", help="default: the first worker of the run")
    report.add_argument("--span", help="default: the first span of the worker")
    report.add_argument("--view", required=True, help="overview, operators, kernels, ...")
    report.add_argument("--group-by", help="operator | operator_input_shape | kernel | "
                        "kernel_op_launch")
    report.add_argument("--format", choices=("json", "csv"), default="json")
    return parser


def _cache(args: argparse.Namespace) -> TraceCache:
    if args.no_cache:
        return TraceCache(None)
    if args.cache_dir:
        return TraceCache(Path(args.cache_dir).expanduser())
    return default_cache()


# -- summary -------------------------------------------------------------------------------


def _summary(args: argparse.Namespace, cache: TraceCache) -> int:
    runs = discover_runs(args.logdir)
    rows = [_summarise_run(run, cache, show_progress=not args.json) for run in runs]
    if args.json:
        json.dump({"logdir": args.logdir, "runs": rows}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_summary(args.logdir, rows, sys.stdout)
    return 0  # broken workers are reported, not fatal


def _summarise_run(run: RunInfo, cache: TraceCache, show_progress: bool) -> dict[str, Any]:
    workers = []
    for worker, spans in run.workers.items():
        entries = []
        for span in spans:
            progress = _Progress(f"{run.name}/{worker}#{span.span}", span.ref.size,
                                 enabled=show_progress)
            table = load_trace(span.ref, cache=cache, progress=progress.update)
            progress.close()
            entries.append(_span_summary(span, table))
        workers.append({"name": worker, "spans": entries})
    return {
        "name": run.name,
        "path": run.path,
        "workers": workers,
        "memory_timelines": [ref.url for ref in run.memory_timelines],
    }


def _span_summary(span: SpanFile, table: TraceTable) -> dict[str, Any]:
    return {
        "span": span.span,
        "file": span.ref.url,
        "bytes": span.ref.size,
        "state": table.status.state,
        "messages": table.status.messages,
        "events": table.event_count,
        "duration_events": len(table.events),
        "memory_events": len(table.memory),
        "flow_events": len(table.flows),
    }


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


class _Progress:
    """A one-line progress bar on stderr, for files big enough to wait for (TTY only)."""

    _MIN_BYTES = 20 << 20

    def __init__(self, label: str, total: int, enabled: bool) -> None:
        self.label, self.total = label, max(total, 1)
        self.enabled = enabled and sys.stderr.isatty() and total >= self._MIN_BYTES
        self._last = 0.0

    def update(self, done_bytes: int) -> None:
        # Decompressed bytes outrun a gzip file's size: show MB read rather than a fake percent.
        now = time.monotonic()
        if not self.enabled or now - self._last < 0.2:
            return
        self._last = now
        sys.stderr.write(f"\rparsing {self.label}: {done_bytes / 1e6:,.0f} MB read")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 79 + "\r")


# -- report --------------------------------------------------------------------------------


class UsageError(Exception):
    pass


def _report(args: argparse.Namespace, cache: TraceCache) -> int:
    try:
        span = _select(discover_runs(args.logdir), args)
    except UsageError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    table = load_trace(span.ref, cache=cache)
    if table.status.state == "error":
        sys.stderr.write(f"error: {span.ref.url}: {'; '.join(table.status.messages)}\n")
        return 1
    from .analysis.report import build_view

    options = {"group_by": args.group_by} if args.group_by else {}
    try:
        payload = build_view(table, args.view, **options)
    except (KeyError, ValueError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.format == "csv":
        sys.stdout.write(payload_to_csv(payload))
    else:
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


def _select(runs: list[RunInfo], args: argparse.Namespace) -> SpanFile:
    run = next((r for r in runs if r.name == args.run), None)
    if run is None:
        raise UsageError(f"no run {args.run!r}; runs: {', '.join(r.name for r in runs) or '-'}")
    worker = args.worker or next(iter(run.workers), None)
    if worker not in run.workers:
        raise UsageError(f"no worker {worker!r} in {run.name}; workers: {', '.join(run.workers)}")
    spans = run.workers[worker]
    span = spans[0] if args.span is None else run.span_file(worker, args.span)
    if span is None:
        raise UsageError(f"no span {args.span!r}; spans: {', '.join(s.span for s in spans)}")
    return span


def payload_to_csv(payload: dict[str, Any]) -> str:
    """The payload's main table as CSV: `rows`, or the per-step breakdown for the overview."""
    rows = payload.get("rows")
    if rows is None and "steps" in payload:
        rows = [{"step": s["name"], "total_us": s["total_us"], **s["breakdown_us"]}
                for s in payload["steps"]]
    rows = rows or []
    out = io.StringIO()
    fields = list(dict.fromkeys(key for row in rows for key in row))
    writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


if __name__ == "__main__":
    sys.exit(main())
