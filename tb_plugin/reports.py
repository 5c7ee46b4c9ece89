"""One view of one trace (or span, or pair) of a logdir, as the server builds it: the payloads
of `torch-prof report`, the MCP server's tools and the Python API's `Logdir.view`.

Only the runs asked for are listed (`discovery.discover_run`: one folder each), and only the
files the view reads are loaded, so a report on a logdir of many runs reads (and warns about)
those files alone. A one-trace view whose spec caches on disk is read from (or written to) the
cache's payload entry under the server's key, so a cached report, like the server, neither
loads the table nor recomputes the view. Errors: `UsageError` for what the caller can fix
(unknown names, options a view does not take, a missing logdir: the server's 400/404, the CLI's
exit 2), `LoadError` for a trace the view needs that cannot be read (exit 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import msgspec

from .cache import TraceCache
from .discovery import RunInfo, SpanFile, discover_run, discover_runs
from .ingest import TraceTable
from .load import load_trace
from .span_workers import NoWorkerHasSpan, NoWorkerReadable, span_workers
from .storage import filesystem
from .views.options import option_fields, read_options
from .views.registry import SPECS
from .views.spec import DISK, EXPORT, PAIR, SNAPSHOT, SPAN, TABLE, ViewSpec


class UsageError(Exception):
    """Something the caller can fix: an unknown name, a bad option, a missing logdir."""


class LoadError(Exception):
    """A trace the view needs could not be read."""


@dataclass(frozen=True)
class Target:
    """One worker span of a run; worker and span default to the run's first."""

    run: str
    worker: Optional[str] = None
    span: Optional[str] = None


def view_aliases() -> dict[str, str]:
    """Tab names (as the UI shows them, any case) -> the first data view of that tab."""
    aliases: dict[str, str] = {}
    for spec in SPECS.values():
        aliases.setdefault(spec.view.lower(), spec.name)
    return {tab: name for tab, name in aliases.items() if tab not in SPECS}


def view_spec(name: str) -> ViewSpec:
    """The spec of a data view name or a tab name (any case)."""
    spec = SPECS.get(name) or SPECS.get(name.lower()) or \
        SPECS.get(view_aliases().get(name.lower(), ""))
    if spec is None:
        raise UsageError(f"unknown view {name!r}; tab names: {', '.join(view_aliases())}; "
                         f"known views: {', '.join(SPECS)}")
    return spec


def options_from(spec: ViewSpec, values: dict[str, Any]) -> Any:
    """The spec's options from values by attribute name (JSON numbers or text), validated as
    the server validates its query string: unknown names are a UsageError."""
    fields = {field.attr: field for field in option_fields(spec.options)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise UsageError(f"{', '.join(unknown)} not taken by the {spec.name} view; it takes: "
                         f"{', '.join(fields) or 'nothing'}")
    by_param = {fields[attr].param: _text(value) for attr, value in values.items()
                if value is not None}
    return read_options(spec.options, by_param.get)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def missing_logdir(logdir: str) -> Optional[str]:
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


def build_report(logdir: str, spec: ViewSpec, options: Any, cache: TraceCache, target: Target,
                 exp: Optional[Target] = None) -> Any:
    """The payload of `spec` for `target` (and `exp`, the other side of a pair view)."""
    missing = missing_logdir(logdir)
    if missing:
        raise UsageError(missing)
    run = find_run(logdir, target.run, cache.config.serve_outside_logdir)
    if spec.kind == SPAN:
        return _distributed(run, target.span, cache, spec, options)
    if spec.kind == SNAPSHOT:
        return _build_snapshot(run, target, spec, options, cache)
    if spec.kind == EXPORT and not run.workers:
        return spec.build(None, _only_export(run), options)
    span = select_span(run, target.worker, target.span)
    if spec.kind == TABLE and spec.cache(options) == DISK:  # as the server: cached per file
        return cache.payload(span.ref, spec.payload_key(options), lambda: spec.build(
            load_span(span, cache), options), spec.payload)
    table = load_span(span, cache)
    if spec.kind == PAIR:
        if exp is None:
            raise UsageError(f"--view {spec.name} needs --exp-run (the run to compare with)")
        exp_run = find_run(logdir, exp.run, cache.config.serve_outside_logdir)
        other = load_span(select_span(exp_run, exp.worker, exp.span), cache)
        return spec.build(table, other, options)
    if spec.kind == EXPORT:
        return spec.build(table, _export_of(span), options)
    return spec.build(table, options)


def find_run(logdir: str, name: str, serve_outside_logdir: bool = False) -> RunInfo:
    """The run `name`, listing only its folder; else a UsageError naming the runs there are.
    `serve_outside_logdir` as `discovery.discover_runs` takes it."""
    run = discover_run(logdir, name, serve_outside_logdir=serve_outside_logdir)
    if run is None:
        runs = discover_runs(logdir, serve_outside_logdir=serve_outside_logdir)
        raise UsageError(f"no run {name!r}; runs: {', '.join(r.name for r in runs) or '-'}")
    return run


def select_span(run: RunInfo, worker: Optional[str], span_name: Optional[str]) -> SpanFile:
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


def load_span(span: SpanFile, cache: TraceCache) -> TraceTable:
    table = load_trace(span.ref, cache=cache)
    if table.status.state == "error":
        raise LoadError(f"{span.ref.url}: {'; '.join(table.status.messages)}")
    return table


def _build_snapshot(run: RunInfo, target: Target, spec: ViewSpec, options: Any,
                    cache: TraceCache) -> Any:
    """The run's snapshot (`--snapshot`, else the one named after the span's trace, else the
    one of its period, else the first readable one), on the span's clock when the run has
    traces."""
    snapshots = run.memory_snapshots
    if not snapshots:
        raise UsageError(f"run {run.name} has no allocator snapshot (*.pickle, *snapshot*.pkl)")
    span = select_span(run, target.worker, target.span) if run.workers else None
    if options.snapshot is not None:
        ref = next((r for r in snapshots if r.name == options.snapshot), None)
        if ref is None:
            raise UsageError(f"no snapshot {options.snapshot!r}; snapshots: "
                             f"{', '.join(r.name for r in snapshots)}")
        candidates = [ref]
    else:  # named after the span's trace, else the one of its period
        paired = span.memory_snapshot if span is not None else None
        candidates = [paired] if paired is not None else snapshots
    table = load_span(span, cache) if span is not None else None
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
        files_of = {w: run.span_file(w, span_name) for w in chosen}
        return spec.build(inputs, skipped, options, {
            w: load_span(f, cache) for w, f in files_of.items() if f is not None})
    return spec.build(inputs, skipped, options)


def _summarised(span: SpanFile, cache: TraceCache, spec: ViewSpec) -> tuple[str, list[str], Any]:
    """(state, messages, the spec's per-file summary or the table) of one span file; a cached
    summary is read alone (it carries the file's load state), never the table."""
    if spec.summarize is not None:
        cached = _cached_summary(span, cache, spec)
        if cached is not None:
            return cached
    table = load_trace(span.ref, cache=cache)
    status = table.status
    summarize: Optional[Callable[[Any], Any]] = spec.summarize
    if status.state == "error" or summarize is None:
        return status.state, status.messages, table
    summary = cache.payload(span.ref, spec.summary_key(), lambda: summarize(table),
                            spec.summary_type)
    return status.state, status.messages, summary


def _cached_summary(span: SpanFile, cache: TraceCache, spec: ViewSpec
                    ) -> Optional[tuple[str, list[str], Any]]:
    """A cached summary that says its file's load state, converted once to the spec's summary
    type (a Struct the builder takes as is); None when there is none or it is not of that type
    (then `cache.payload` deletes and recomputes it)."""
    stored = cache.get_payload(span.ref, spec.summary_key())
    if not isinstance(stored, dict) or "load_state" not in stored:
        return None
    try:
        value = stored if spec.summary_type is None else msgspec.convert(stored,
                                                                         spec.summary_type)
    except msgspec.ValidationError:
        return None
    return str(stored["load_state"]), [str(m) for m in stored.get("load_messages") or []], value


def _export_of(span: SpanFile) -> Any:
    export = span.memory_timeline
    if export is None:
        raise UsageError(f"no memory-timeline export (*.raw.json.gz) for {span.ref.name}")
    return export


def _only_export(run: RunInfo) -> Any:
    if len(run.memory_timelines) != 1:
        raise UsageError(f"run {run.name} has {len(run.memory_timelines)} memory-timeline "
                         "exports and no trace; expected exactly one")
    return run.memory_timelines[0]
