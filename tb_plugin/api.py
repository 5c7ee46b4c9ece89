"""The public Python API, for notebooks and scripts (in the style of Holistic Trace Analysis):
open a logdir or one trace file, list runs / workers / spans, and get each analysis as a pandas
DataFrame holding the numbers the UI shows.

    from tb_plugin.api import open_logdir, open_trace
    logdir = open_logdir("samples")                 # local folder or fsspec URL
    trace = logdir.trace("cnn_bs32")                # first worker and span, like the CLI
    trace.operators(group_by="operator")            # the Operator view, one row per operator

Traces are read through the same on-disk cache as the CLI and the server (`cache_dir`, default
$TORCH_PROF_CACHE_DIR or the user cache; `use_cache=False` always parses). Frames come from the
functions the view builders are shaped from (`analysis.operators.operator_table`,
`analysis.kernels.kernel_table`, `analysis.frames`), so they cannot disagree with the UI.
Unknown names raise `NotFoundError` (a KeyError) naming the known ones; bad options raise
ValueError; a trace that cannot be read raises `UnreadableTraceError` (a ValueError).
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd

from .analysis.frames import (
    collective_frame,
    memory_devices,
    memory_event_frame,
    memory_operator_frame,
    module_frame,
    step_frame,
)
from .analysis.graphs import CAPTURE_SUFFIX, graph_summary, merge_capture, paired_capture_run
from .analysis.inference.view import build_inference
from .analysis.kernels import GROUP_BY_KERNEL, kernel_table
from .analysis.operators import GROUP_BY_OPERATOR, call_stack_table, operator_table
from .analysis.overview import build_overview
from .analysis.whatif import build_whatif, parse_edits
from .api_views import (
    HAND_WRITTEN,
    LogdirViews,
    NotFoundError,
    TraceViews,
    UnreadableTraceError,
)
from .cache import TraceCache, cache_location, open_cache
from .discovery import RunInfo, SpanFile, discover_runs
from .ingest import LoadState, ParseStatus, TraceTable
from .load import load_trace
from .settings import Settings, settings
from .span_workers import NoWorkerHasSpan, NoWorkerReadable, span_workers

__all__ = ["HAND_WRITTEN", "Logdir", "NotFoundError", "Trace", "UnreadableTraceError",
           "open_logdir", "open_trace"]


def open_logdir(logdir: str, *, cache_dir: Union[str, Path, None] = None,
                use_cache: bool = True, config: Optional[Settings] = None) -> Logdir:
    """The runs under `logdir` (a local folder or an fsspec URL such as s3://bucket/logs).
    `config`: the settings to use (default: the `TORCH_PROF_*` environment, read here)."""
    return Logdir(logdir, _cache(cache_dir, use_cache, config))


def open_trace(path: str, *, cache_dir: Union[str, Path, None] = None,
               use_cache: bool = True, config: Optional[Settings] = None) -> Trace:
    """One trace file (`*.pt.trace.json[.gz]`, local path or fsspec URL); `config` as in
    `open_logdir`."""
    return Trace(_readable(load_trace(path, cache=_cache(cache_dir, use_cache, config)), path),
                 path)


def _cache(cache_dir: Union[str, Path, None], use_cache: bool,
           config: Optional[Settings]) -> TraceCache:
    """As the CLI: off, a given folder, or the default cache, carrying the settings."""
    config = config if config is not None else settings()
    if not use_cache:
        return TraceCache(None, config)
    if cache_dir is not None:
        return TraceCache(cache_location(cache_dir), config)
    return open_cache(config)


def _readable(table: TraceTable, path: str) -> TraceTable:
    if table.status.state == LoadState.ERROR:
        raise UnreadableTraceError(f"{path}: {'; '.join(table.status.messages)}")
    return table


class Trace(TraceViews):
    """The analyses of one trace (one worker, one span) as DataFrames. Durations are us on the
    trace clock, sizes bytes; each column name says its unit."""

    def __init__(self, table: TraceTable, path: str, run: Optional[str] = None,
                 worker: Optional[str] = None, span: Optional[str] = None) -> None:
        self.table, self.path = table, path
        self.run, self.worker, self.span = run, worker, span

    def __repr__(self) -> str:
        where = f"{self.run}/{self.worker}#{self.span}" if self.run is not None else self.path
        return f"<Trace {where}: {self.table.status.state}, {len(self.table.events):,} events>"

    @property
    def status(self) -> ParseStatus:
        """How the parse went: `state` (ok, partial, truncated) and `messages`."""
        return self.table.status

    def overview(self) -> dict[str, Any]:
        """The Overview payload (steps, average, GPUs, recommendations...): not tabular."""
        return copy.deepcopy(build_overview(self.table))  # the memoised payload stays intact

    def whatif(self, edit: str, step: Optional[str] = None) -> dict[str, Any]:
        """Predicted step times when the `edit` (e.g. `"op:aten::mm=0.5; launch=0"`: the
        grammar of `tb_plugin.analysis.whatif.edits`) is applied to each step's dependency
        model; `step` replays that step only. Raises `EditError` (a ValueError) for an edit it
        cannot read and `StepNotFound` (a LookupError) for an unknown step."""
        return build_whatif(self.table, parse_edits(edit), step)

    def steps(self) -> pd.DataFrame:
        """Per step: step, start_us, end_us, total_us and one `<category>_us` column per
        category of the step-time breakdown (kernel_us ... cpu_exec_us, other_us)."""
        return step_frame(self.table)

    def operators(self, group_by: str = GROUP_BY_OPERATOR) -> pd.DataFrame:
        """The Operator view: group_by "operator" or "operator_input_shape"; times unrounded."""
        return operator_table(self.table, group_by)

    def call_stacks(self, name: str, input_shape: Optional[str] = None,
                    group_by: str = GROUP_BY_OPERATOR) -> pd.DataFrame:
        """One operator's rows per call stack (KeyError for an unknown operator)."""
        return call_stack_table(self.table, name, input_shape, group_by)

    def kernels(self, group_by: str = GROUP_BY_KERNEL) -> pd.DataFrame:
        """The Kernel view: group_by "kernel" or "kernel_op_launch"; times unrounded."""
        return kernel_table(self.table, group_by)

    def memory_devices(self) -> list[str]:
        """Devices with memory records (CPU, GPU0, ...)."""
        return memory_devices(self.table)

    def memory_events(self, device: Optional[str] = None, start_us: Optional[float] = None,
                      end_us: Optional[float] = None) -> pd.DataFrame:
        """Allocation/release pairs of the Memory view (every device when `device` is None)."""
        return memory_event_frame(self.table, device, start_us, end_us)

    def memory_operators(self, device: Optional[str] = None, start_us: Optional[float] = None,
                         end_us: Optional[float] = None) -> pd.DataFrame:
        """Per (device, operator) memory statistics of the Memory view."""
        return memory_operator_frame(self.table, device, start_us, end_us)

    def modules(self) -> pd.DataFrame:
        """The Module view's hierarchy, one row per module, depth first."""
        return module_frame(self.table)

    def graphs(self) -> dict[str, Any]:
        """CUDA/HIP graph facts: mode (replay, capture, none), launches, replayed and
        attributed kernel time, backlog (`analysis.graphs.graph_summary`)."""
        return copy.deepcopy(graph_summary(self.table))


class Logdir(LogdirViews):
    """The runs of one logdir as found when opened (`refresh()` scans again). Loaded traces
    are kept in memory while this object lives, so repeated questions are answered at once."""

    def __init__(self, logdir: str, cache: TraceCache) -> None:
        self.logdir, self._cache = logdir, cache
        self._tables: dict[str, TraceTable] = {}
        self.refresh()

    def __repr__(self) -> str:
        return f"<Logdir {self.logdir}: {len(self._runs)} runs>"

    def refresh(self) -> None:
        """Find runs, workers and spans again (new files written since)."""
        self._runs = {run.name: run for run in discover_runs(
            self.logdir, serve_outside_logdir=self._cache.config.serve_outside_logdir)}
        self._tables.clear()

    def runs(self) -> list[str]:
        return list(self._runs)

    def workers(self, run: str) -> list[str]:
        return list(self._run(run).workers)

    def spans(self, run: str, worker: Optional[str] = None) -> list[str]:
        """The spans of `worker` (default: the run's first worker), in time order."""
        info = self._run(run)
        return [s.span for s in info.workers[self._worker(info, worker)]]

    def trace(self, run: str, worker: Optional[str] = None, span: Optional[str] = None
              ) -> Trace:
        """One worker's span; `worker` and `span` default to the first, like the CLI."""
        info = self._run(run)
        worker = self._worker(info, worker)
        file = self._span_file(info, worker, span)
        return Trace(self._table(file), file.ref.url, run, worker, file.span)

    def collectives(self, run: str, span: Optional[str] = None) -> pd.DataFrame:
        """Communication-op statistics per (worker, collective) over every usable worker of
        `span` (default: the first worker's first span), as the Distributed view. Workers left
        out (unreadable) are reported with `warnings.warn`."""
        info = self._run(run)
        span = span or self.spans(run)[0]
        files = ((w, None if (f := info.span_file(w, span)) is None else self._loaded(f))
                 for w in info.workers)
        found = span_workers(span, files, _report)
        try:
            tables, skipped = found.require(run, span)
        except NoWorkerHasSpan:
            known = sorted({s.span for spans in info.workers.values() for s in spans})
            raise NotFoundError(f"no worker of run {run!r} has span {span!r}; spans: "
                                f"{', '.join(known)}") from None
        except NoWorkerReadable as exc:
            raise UnreadableTraceError(f"{exc.message}: {'; '.join(exc.details())}") from None
        for worker, why in sorted(skipped.items()):
            warnings.warn(f"{run}/{worker}#{span}: left out: {why}", stacklevel=2)
        return collective_frame(tables)

    def graph_kernels(self, run: str, worker: Optional[str] = None,
                      span: Optional[str] = None) -> pd.DataFrame:
        """The replayed graph kernels of `run` with the operator that captured each, from its
        capture run `<run>/capture` (`analysis.graphs.merge_capture`; its first worker and
        span). NotFoundError when the run has no capture run."""
        capture = paired_capture_run(run, self.runs())
        if capture is None:
            raise NotFoundError(f"run {run!r} has no capture run {run + CAPTURE_SUFFIX!r}")
        return merge_capture(self.trace(run, worker, span).table, self.trace(capture).table)

    def inference(self, run: str, worker: Optional[str] = None,
                  span: Optional[str] = None) -> dict[str, Any]:
        """The Inference view's payload of one worker span; a replay with a capture run
        `<run>/capture` also reads it, so the replayed steps' bytes are sized from the
        captured operators' shapes and their kernels categorized by the captured operators."""
        capture = paired_capture_run(run, self.runs())
        return dict(build_inference(self.trace(run, worker, span).table,
                                    self.trace(capture).table if capture else None))

    def _run(self, run: str) -> RunInfo:
        if run not in self._runs:
            raise NotFoundError(f"no run {run!r} in {self.logdir}; runs: "
                                f"{', '.join(self._runs) or '-'}")
        return self._runs[run]

    @staticmethod
    def _worker(info: RunInfo, worker: Optional[str]) -> str:
        if not info.workers:  # a run of memory-timeline exports only
            raise NotFoundError(f"run {info.name!r} has no trace files")
        if worker is None:
            return next(iter(info.workers))
        if worker not in info.workers:
            raise NotFoundError(f"no worker {worker!r} in run {info.name!r}; workers: "
                                f"{', '.join(info.workers) or '-'}")
        return worker

    @staticmethod
    def _span_file(info: RunInfo, worker: str, span: Optional[str]) -> SpanFile:
        spans = info.workers[worker]
        file = spans[0] if span is None else info.span_file(worker, span)
        if file is None:
            raise NotFoundError(f"no span {span!r} of worker {worker!r} in run {info.name!r}; "
                                f"spans: {', '.join(s.span for s in spans)}")
        return file

    def _loaded(self, file: SpanFile) -> TraceTable:
        """The parsed file, even when unreadable (then the table says why)."""
        url = file.ref.url
        if url not in self._tables:
            self._tables[url] = load_trace(file.ref, cache=self._cache)
        return self._tables[url]

    def _table(self, file: SpanFile) -> TraceTable:
        return _readable(self._loaded(file), file.ref.url)


def _report(table: TraceTable) -> tuple[str, list[str]]:
    return table.status.state, table.status.messages
