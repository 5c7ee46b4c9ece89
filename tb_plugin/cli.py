"""Command line: `torch-prof summary LOGDIR`, `torch-prof report LOGDIR ...`, and the data
commands `export` and `sql` (`cli_data.py`).

`summary` parses every file through the executor seam (`executors.py`: local processes, or a
Ray cluster with `--cluster` / $TORCH_PROF_CLUSTER) with one progress bar over the ranks.

`report` prints exactly the payloads the server returns (the same view specs of
`tb_plugin.views.registry`, read from the same options, and the same CSV tables), so every view
can be checked (and scripted) without a browser. The help text the user sees is `_DESCRIPTION`
and `_EPILOG` below. Usage errors (unknown names, options a view does not take, a bad window, a
missing logdir) exit with 2, with the message the server answers with 400 or 404; a trace that
cannot be read exits with 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Optional, TextIO

from . import cli_data
from .batch import RankProgress, local_workers, summarise_files
from .cache import TraceCache, cache_location, default_cache, default_cache_dir
from .discovery import RunInfo, SpanFile, discover_runs
from .executors import make_executor
from .ingest import TraceTable
from .load import load_trace
from .output.encoding import pretty_json
from .output.rows import csv_bytes
from .output.terminal import table_text
from .settings import CLUSTER_ENV, available_memory, settings, usable_cpus
from .span_workers import NoWorkerHasSpan, NoWorkerReadable, span_workers
from .storage import filesystem
from .views.errors import NotInTrace, OptionError, Unreadable
from .views.options import OptionField, option_fields, read_options
from .views.registry import SPECS
from .views.spec import EXPORT, PAIR, SNAPSHOT, SPAN, ViewSpec
from .views.tabs import VIEWS

_DESCRIPTION = """\
Read PyTorch profiler traces without a browser: list what a logdir holds, or print one view
of one trace (the same numbers the TensorBoard tab shows)."""

_EPILOG = """\
examples:
  {prog} summary ./logs
      every run, worker and span under ./logs with its state and event count

  {prog} report ./logs --run resnet --view operator
      the Operator table of the run's first worker and span, as a table on a terminal

  {prog} report ./logs --run resnet --worker host_1 --span 2 --view kernel --format csv
      the Kernel table of one worker span as CSV (--format json: the server's JSON)

  {prog} report ./logs --run resnet --view timeline_search --query conv
      Trace events whose name contains "conv"

  {prog} report ./logs --run resnet --view diff --exp-run resnet_amp
      the Diff of two runs (their first worker and span each)

  {prog} summary s3://bucket/logs --cluster ray://head:10001 --cache-dir s3://bucket/cache
      parse every file on a Ray cluster, into a cache the cluster's nodes share

  {prog} sql ./logs "SELECT name, sum(dur) FROM events GROUP BY 1 ORDER BY 2 DESC LIMIT 10"
      one SQL statement over the parsed tables ({prog} export: the tables as Parquet)

--view takes a data view name ({views}) or a tab name ({tabs}).
--worker and --span default to the run's first worker and its first span.
"""


def main(argv: Optional[list[str]] = None) -> int:
    args = _parser(_program_name()).parse_args(argv)
    cache = _cache(args)
    if args.command == "summary":
        return _summary(args, cache)
    if args.command in cli_data.COMMANDS:
        return cli_data.run(args, cache)
    return _report(args, cache)


def _program_name() -> str:
    """`torch-prof` when run as the console script, `python -m tb_plugin` for the module."""
    name = os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else "torch-prof")
    return "python -m tb_plugin" if name in ("__main__.py", "-m", "-c", "") else name


def view_aliases() -> dict[str, str]:
    """Tab names (as the UI shows them, any case) -> the first data view of that tab."""
    aliases: dict[str, str] = {}
    for spec in SPECS.values():
        aliases.setdefault(spec.view.lower(), spec.name)
    return {tab: name for tab, name in aliases.items() if tab not in SPECS}


def _parser(prog: str = "torch-prof") -> argparse.ArgumentParser:
    tabs = ", ".join(view.name.lower() for view in VIEWS.values()
                     if view.name.lower() in view_aliases())
    parser = argparse.ArgumentParser(
        prog=prog, description=_DESCRIPTION, epilog=_EPILOG.format(
            prog=prog, views=", ".join(SPECS), tabs=tabs),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache-dir", help=f"parsed-trace cache (default {default_cache_dir()})")
    parser.add_argument("--no-cache", action="store_true", help="always parse from scratch")
    commands = parser.add_subparsers(dest="command", required=True)
    summary = commands.add_parser("summary", help="runs, workers, spans, event counts, status")
    summary.add_argument("logdir", help="local folder or fsspec URL (s3://, gs://, ...)")
    summary.add_argument("--json", action="store_true", help="machine-readable output")
    summary.add_argument("--cluster", help="parse on a Ray cluster: ray://HOST:PORT, HOST:PORT "
                         f"or auto (default ${CLUSTER_ENV}); the cache must be shared")
    summary.add_argument("--progress", action="store_true",
                         help="show the progress bar over files also when stderr is no terminal")
    report = commands.add_parser(
        "report", help="print one view of one trace", epilog=parser.epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_argument("logdir", help="local folder or fsspec URL (s3://, gs://, ...)")
    report.add_argument("--run", required=True, help="the run (a folder name, as `summary` "
                        "lists it)")
    report.add_argument("--worker", help="default: the first worker of the run")
    report.add_argument("--span", help="default: the first span of the worker")
    report.add_argument("--view", required=True, help=f"a data view ({', '.join(SPECS)}) or "
                        f"a tab name ({tabs})")
    for flag, takers in _option_flags().items():
        report.add_argument(flag, dest=takers[0][1].attr, help=_flag_help(takers))
    for side in ("run", "worker", "span"):
        report.add_argument(f"--exp-{side}", help=f"diff: the {side} to compare with" + (
            " (required)" if side == "run" else f" (default: its first {side})"))
    report.add_argument("--format", choices=("table", "json", "csv"), default=None,
                        help="table (default on a terminal): readable; json (default when "
                        "piped): the server's payload; csv: the view's table as the server's "
                        "CSV export")
    cli_data.add_commands(commands)
    return parser


def _option_flags() -> dict[str, list[tuple[str, OptionField]]]:
    """Every view option's flag, with the views that take it and their fields."""
    flags: dict[str, list[tuple[str, OptionField]]] = {}
    for spec in SPECS.values():
        for field in option_fields(spec.options):
            flags.setdefault(field.flag, []).append((spec.name, field))
    return flags


def _flag_help(takers: list[tuple[str, OptionField]]) -> str:
    first = takers[0][1]
    choices = dict.fromkeys(c for _, field in takers for c in field.choices)
    text = " | ".join(choices) if choices else first.description or first.param
    if first.default is not None and not choices:
        text += f" (default {first.default})"
    if first.param != first.attr:
        text += f" (parameter {first.param})"
    return f"{', '.join(name for name, _ in takers)}: {text}"


def _cache(args: argparse.Namespace) -> TraceCache:
    if args.no_cache:
        return TraceCache(None)
    if args.cache_dir:
        return TraceCache(cache_location(args.cache_dir))
    return default_cache()


# -- summary -------------------------------------------------------------------------------


def _summary(args: argparse.Namespace, cache: TraceCache) -> int:
    missing = _missing_logdir(args.logdir)
    if missing:
        sys.stderr.write(f"error: {missing}\n")
        return 2
    runs = discover_runs(args.logdir)
    refs = [span.ref for run in runs for spans in run.workers.values() for span in spans]
    config = settings()
    config = replace(config, cluster=args.cluster or config.cluster)
    workers = local_workers(refs, usable_cpus(), available_memory(), config.max_inflate_ratio)
    executor = make_executor(config, max_workers=workers)
    if getattr(executor, "error", None) is not None:  # the cluster is unreachable
        sys.stderr.write(f"error: {executor.error}\n")  # type: ignore[attr-defined]
        return 1
    if cache.enabled and not cache.writable():  # reported once (by the cache); load without it
        cache = TraceCache(None)
    progress = RankProgress(len(refs), sum(ref.size for ref in refs),
                            enabled=bool(refs) and (args.progress or (
                                not args.json and sys.stderr.isatty())))
    try:
        results = iter(summarise_files(executor, refs, cache.root if cache.enabled else None,
                                       progress))
    finally:
        executor.shutdown(wait=True)
        progress.close()
    rows = [_run_row(run, results) for run in runs]
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


def _missing_logdir(logdir: str) -> Optional[str]:
    """Why the logdir cannot be read (it does not exist, or is not a folder), else None."""
    try:
        fs, root = filesystem(logdir)
        if not fs.exists(root):
            return f"{logdir} does not exist"
        if not fs.isdir(root):
            return f"{logdir} is not a folder (give the folder that holds the runs)"
    except (OSError, ValueError, ImportError) as exc:
        return f"cannot read {logdir}: {exc}"
    return None


# -- report --------------------------------------------------------------------------------


class UsageError(Exception):
    pass


class LoadError(Exception):
    """A trace the view needs could not be read (exit 1)."""


def _report(args: argparse.Namespace, cache: TraceCache) -> int:
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
    try:
        spec = _spec(args.view)
        options = _options(args, spec)
        missing = _missing_logdir(args.logdir)
        if missing:
            raise UsageError(missing)
        payload = _build_report(discover_runs(args.logdir), args, spec, options, cache)
        if fmt == "table" and spec.rows is not None:
            table_text(spec.rows, payload, sys.stdout, title=f"{args.run}: {spec.name}")
            return 0
        text = _csv(spec, payload) if fmt == "csv" else pretty_json(payload)
    except (LoadError, Unreadable) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except (UsageError, OptionError, NotInTrace) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(text)
    return 0


def _spec(name: str) -> ViewSpec:
    spec = SPECS.get(name) or SPECS.get(view_aliases().get(name.lower(), ""))
    if spec is None:
        raise UsageError(f"unknown view {name!r}; tab names: {', '.join(view_aliases())}; "
                         f"known views: {', '.join(SPECS)}")
    return spec


def _options(args: argparse.Namespace, spec: ViewSpec) -> Any:
    """The spec's options from the flags, read as the server reads its query string."""
    fields = {field.param: field for field in option_fields(spec.options)}
    taken = {field.attr for field in fields.values()}
    if spec.kind == PAIR:
        taken |= {"exp_run", "exp_worker", "exp_span"}
    every = [takers[0][1].attr for takers in _option_flags().values()]
    every += ["exp_run", "exp_worker", "exp_span"]
    if spec.kind == SPAN:  # it covers every worker of the span
        every.append("worker")
    extra = [name for name in every if getattr(args, name) is not None and name not in taken]
    if extra:
        flags = ", ".join("--" + name.replace("_", "-") for name in extra)
        why = " (it covers every worker of the span)" if extra == ["worker"] else ""
        raise UsageError(f"{flags} not taken by --view {spec.name}{why}")
    if spec.kind == PAIR and args.exp_run is None:
        raise UsageError(f"--view {spec.name} needs --exp-run (the run to compare with)")
    for field in fields.values():
        if field.required and getattr(args, field.attr) is None:
            raise UsageError(f"--view {spec.name} needs {field.flag}")
    return read_options(spec.options, lambda param: getattr(args, fields[param].attr))


def _csv(spec: ViewSpec, payload: Any) -> str:
    """The payload's table as CSV, exactly as the server's `format=csv` answer for that view
    (nested fields as dotted columns, formula-like cells prefixed with `'`)."""
    if spec.rows is None:
        raise UsageError(f"the {spec.name} view has no table; use --format json")
    return csv_bytes(spec.rows, payload).decode("utf-8")


def _build_report(runs: list[RunInfo], args: argparse.Namespace, spec: ViewSpec, options: Any,
                  cache: TraceCache) -> Any:
    run = _find_run(runs, args.run)
    if spec.kind == SPAN:
        return _distributed(run, args.span, cache, spec, options)
    if spec.kind == SNAPSHOT:
        return _build_snapshot(run, args, spec, options, cache)
    if spec.kind == EXPORT and not run.workers:
        return spec.build(None, _only_export(run), options)
    span = _select_span(run, args.worker, args.span)
    table = _load(span, cache)
    if spec.kind == PAIR:
        exp_run = _find_run(runs, args.exp_run)
        exp = _load(_select_span(exp_run, args.exp_worker, args.exp_span), cache)
        return spec.build(table, exp, options)
    if spec.kind == EXPORT:
        return spec.build(table, _export_of(run, span), options)
    return spec.build(table, options)


def _build_snapshot(run: RunInfo, args: argparse.Namespace, spec: ViewSpec, options: Any,
                    cache: TraceCache) -> Any:
    """The run's snapshot (`--snapshot`, else the one named after the span's trace, else the
    one of its period, else the first readable one), on the span's clock when the run has
    traces."""
    snapshots = run.memory_snapshots
    if not snapshots:
        raise UsageError(f"run {run.name} has no allocator snapshot (*.pickle, *snapshot*.pkl)")
    span = _select_span(run, args.worker, args.span) if run.workers else None
    if options.snapshot is not None:
        ref = next((r for r in snapshots if r.name == options.snapshot), None)
        if ref is None:
            raise UsageError(f"no snapshot {options.snapshot!r}; snapshots: "
                             f"{', '.join(r.name for r in snapshots)}")
        candidates = [ref]
    else:  # named after the span's trace, else the one of its period
        paired = span.memory_snapshot if span is not None else None
        candidates = [paired] if paired is not None else snapshots
    table = _load(span, cache) if span is not None else None
    return spec.build(table, (candidates, [r.name for r in snapshots]), options)


def _distributed(run: RunInfo, span_name: Optional[str], cache: TraceCache,
                 spec: ViewSpec, options: Any) -> dict[str, Any]:
    """All workers of one span (default: the first worker's first span), like the server: one
    file at a time, keeping only its summary (cached next to its table)."""
    if not run.workers:
        raise UsageError(f"run {run.name} has no trace files")
    span_name = span_name or next(iter(run.workers.values()))[0].span
    spans = ((worker, run.span_file(worker, span_name)) for worker in run.workers)
    files = ((worker, None if span is None else _summarised(span, cache, spec))
             for worker, span in spans)
    found = span_workers(span_name, files, lambda loaded: (loaded[0], loaded[1]))
    try:
        tables, skipped = found.require(run.name, span_name)
    except NoWorkerHasSpan as exc:
        raise UsageError(str(exc)) from None
    except NoWorkerReadable as exc:
        raise LoadError(f"{exc.message}: {exc.skipped}") from None
    inputs = {w: loaded[2] for w, loaded in tables.items()}
    if spec.span_tables is not None:  # and the chosen workers' tables (a few)
        chosen = spec.span_tables(inputs, options)
        spans = {w: run.span_file(w, span_name) for w in chosen}
        return spec.build(inputs, skipped, options, {
            w: _load(f, cache) for w, f in spans.items() if f is not None})
    return spec.build(inputs, skipped, options)


def _summarised(span: SpanFile, cache: TraceCache, spec: ViewSpec) -> tuple[str, list[str], Any]:
    """(state, messages, the spec's per-file summary or the table) of one span file."""
    table = load_trace(span.ref, cache=cache)
    status = table.status
    if status.state == "error" or spec.summarize is None:
        return status.state, status.messages, table
    summary = cache.payload(span.ref, spec.summary_key(), lambda: spec.summarize(table),
                            spec.summary_type)
    return status.state, status.messages, summary


def _load(span: SpanFile, cache: TraceCache) -> TraceTable:
    table = load_trace(span.ref, cache=cache)
    if table.status.state == "error":
        raise LoadError(f"{span.ref.url}: {'; '.join(table.status.messages)}")
    return table


def _export_of(run: RunInfo, span: SpanFile) -> Any:
    export = span.memory_timeline
    if export is None:
        raise UsageError(f"no memory-timeline export (*.raw.json.gz) for {span.ref.name}")
    return export


def _only_export(run: RunInfo) -> Any:
    if len(run.memory_timelines) != 1:
        raise UsageError(f"run {run.name} has {len(run.memory_timelines)} memory-timeline "
                         "exports and no trace; expected exactly one")
    return run.memory_timelines[0]


def _find_run(runs: list[RunInfo], name: str) -> RunInfo:
    run = next((r for r in runs if r.name == name), None)
    if run is None:
        raise UsageError(f"no run {name!r}; runs: {', '.join(r.name for r in runs) or '-'}")
    return run


def _select_span(run: RunInfo, worker: Optional[str], span_name: Optional[str]) -> SpanFile:
    if not run.workers:
        exports = " (only a memory-timeline export: use --view memory_timeline)" if (
            run.memory_timelines) else ""
        raise UsageError(f"run {run.name} has no trace files{exports}")
    worker = worker or next(iter(run.workers), None)
    if worker not in run.workers:
        raise UsageError(f"no worker {worker!r} in {run.name}; workers: "
                         f"{', '.join(run.workers) or '-'}")
    spans = run.workers[worker]
    span = spans[0] if span_name is None else run.span_file(worker, span_name)
    if span is None:
        raise UsageError(f"no span {span_name!r}; spans: {', '.join(s.span for s in spans)}")
    return span


if __name__ == "__main__":
    sys.exit(main())
