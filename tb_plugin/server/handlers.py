"""The data routes, one per `ViewSpec` of `tb_plugin.views.registry`, served by kind:

- TABLE `?run&worker&span[&options]`: one worker span's payload;
- SPAN `/distributed?run&span`: every usable worker's file of that span index (202 while any of
  them is still loading; broken workers and workers without that span are left out with a
  message);
- PAIR `/diff?run&worker&span&exp_run&exp_worker&exp_span[&options]`: two files (202 if either
  loads);
- EXPORT `/memory/timeline?run[&worker&span]`: the memory-timeline export paired with that span
  (else the run's only unpaired export), on the trace's clock; without worker and span, the
  run's only export on its own clock (a run that holds exports but no trace);
- SNAPSHOT `/memory/snapshot?run[&worker&span][&snapshot=name]`: an allocator snapshot of the
  run (default: the one named after the span's trace, else the run's first), on that span's
  trace clock when they overlap, else on its own.

Every route reads its options with the spec's Struct (`views.options.read_options`) and answers
JSON, or CSV (`format=csv`) for specs with CSV rows. Payloads are cached per the spec's policy,
under `ViewSpec.payload_key`; payloads of several files only in the in-memory body LRU, keyed
by every file's identity. `/trace/download` streams a trace file as stored.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Iterator
from typing import Any, Callable, Optional

from tensorboard.backend import http_util
from werkzeug import wrappers

from ..discovery import matching_snapshot
from ..output.encoding import plain
from ..output.rows import csv_bytes
from ..output.tabular import csv_filename
from ..storage import FileRef, NotRegularFile, check_servable, open_to_serve
from ..views.errors import Unreadable
from ..views.options import read_options
from ..views.spec import DISK, EXPORT, MEMORY, PAIR, SNAPSHOT, SPAN, TABLE, ViewSpec
from ..views.tabs import views_of_file
from .api import CSV, JSON, Query, encode_json, gzip_response, gzipped, json_response
from .errors import BadRequest, Forbidden, NotFound
from .provider import TraceFile, TraceProvider

Handler = Callable[[TraceProvider, wrappers.Request], wrappers.Response]
DOWNLOAD_CHUNK = 1 << 20
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def handler_of(spec: ViewSpec) -> Handler:
    """The handler that serves `spec`'s route (by its kind)."""
    serve = {TABLE: _table, SPAN: _span, PAIR: _pair, EXPORT: _export,
             SNAPSHOT: _snapshot}[spec.kind]
    return functools.partial(serve, spec=spec)


# -- responses ----------------------------------------------------------------------------------


def _options(query: Query, spec: ViewSpec) -> Any:
    return read_options(spec.options, lambda name: query.text(name, required=False))


def output_format(query: Query, spec: ViewSpec) -> str:
    """`format`: json (default) or csv, the latter only for specs with CSV rows."""
    fmt = query.choice("format", ("json", "csv"), "json")
    if fmt == "csv" and spec.rows is None:
        raise BadRequest("this route has no CSV form; omit format or use format=json")
    return fmt


def send_payload(request: wrappers.Request, store: TraceProvider, spec: ViewSpec,
                 payload: Callable[[], Any], *, fmt: str, memo: Optional[tuple],
                 name: tuple[str, ...]) -> wrappers.Response:
    """JSON, or CSV for `fmt` "csv" (see `output_format`). With `memo`, encoded bodies are kept
    in the store's body LRU under that key; without, every request encodes anew."""
    rows = spec.rows
    if fmt == "csv" and rows is not None:

        def make_csv() -> bytes:
            return gzipped(csv_bytes(rows, payload()))

        body = store.memo_body((*memo, "csv"), make_csv) if memo else make_csv()
        headers = [("Content-Disposition", f'attachment; filename="{csv_filename(*name)}"')]
        return gzip_response(request, body, CSV, headers)
    if memo is None:
        return json_response(request, payload())  # Respond gzips it when the client accepts
    body = store.memo_body((*memo, "json"), lambda: gzipped(encode_json(payload())))
    return gzip_response(request, body, JSON)


# -- one worker span ----------------------------------------------------------------------------


def _table(store: TraceProvider, request: wrappers.Request, spec: ViewSpec) -> wrappers.Response:
    query = Query(request)
    run, worker, span = query.text("run"), query.text("worker"), query.text("span")
    options = _options(query, spec)
    fmt = output_format(query, spec)
    file = store.usable_file(run, worker, span)
    if spec.view not in views_of_file(dict(file.features)):
        raise NotFound(f"worker {worker[:120]!r} span {span[:60]!r} has no {spec.view} view")
    key, cache = spec.payload_key(options), spec.cache(options)

    def compute(table: Any) -> Any:
        if spec.prepare is not None:
            store.prepare(file, table, spec.prepare)
        return spec.build(table, options)

    def payload() -> Any:
        if cache == DISK:
            return store.payload(file, key, compute, spec.payload)
        return compute(store.table(file))

    memo = None if cache not in (DISK, MEMORY) else (file.identity, key)
    response = send_payload(request, store, spec, payload, fmt=fmt, memo=memo,
                            name=(run, worker, span, spec.route.strip("/")))
    # The user looks at this worker span: index its timeline in the background, once this
    # view's payload is made (on the first view of a file, sharing the interpreter with the
    # index build made Overview + Operator 0.6-1 s slower at 200 MB).
    store.warm(file)
    return response


# -- every worker of a span ---------------------------------------------------------------------


def _span(store: TraceProvider, request: wrappers.Request, spec: ViewSpec) -> wrappers.Response:
    query = Query(request)
    run, span = query.text("run"), query.text("span")
    options = _options(query, spec)
    fmt = output_format(query, spec)
    # the files first: a run whose every file failed (an unreachable cluster) answers 422 with
    # why, not 404 "no communication ops" (issue 28)
    files, skipped = store.span_files(run, span)
    if spec.view not in store.views(run):
        raise NotFound(f"run {run[:120]!r} has no {spec.view} view (no worker has "
                       "communication ops)")

    def from_summaries() -> Any:  # one small summary per worker, never all the tables
        key, summarize = spec.summary_key(), spec.summarize
        inputs = {worker: store.payload(file, key, summarize, spec.summary_type)
                  for worker, file in files.items()}
        if spec.span_tables is not None:  # and a few chosen workers' tables
            return spec.build(inputs, skipped, options, {
                worker: _prepared(store, spec, files[worker])
                for worker in spec.span_tables(inputs, options)})
        return spec.build(inputs, skipped, options)

    def payload() -> Any:
        if spec.summarize is not None and spec.span_tables is None and (
                spec.cache(options) == DISK):  # kept on disk beside the first worker's file
            key = spec.payload_key(options, span=span, files=files_digest(files, skipped))
            return store.run_payload(files[min(files)], key, lambda: plain(from_summaries()),
                                     spec.payload)
        if spec.summarize is not None:
            return from_summaries()
        tables = {worker: store.table(file) for worker, file in files.items()}
        return spec.build(tables, skipped, options)

    memo = None if spec.cache(options) not in (DISK, MEMORY) else (
        spec.name, *sorted((w, f.identity) for w, f in files.items()),
        *sorted(skipped.items()), spec.payload_key(options))
    return send_payload(request, store, spec, payload, fmt=fmt, memo=memo,
                        name=(run, span, spec.name))


def files_digest(files: dict[str, TraceFile], skipped: dict[str, str]) -> str:
    """One hash of the workers, their file versions and the left-out workers: a run-level
    payload stored under it is never served for another set of files (issue 28: a restarted
    server answered 1,024 ranks' Distributed view by rebuilding it from every summary)."""
    digest = hashlib.sha1()
    for worker, file in sorted(files.items()):
        digest.update(f"{worker}\0{file.identity}\0".encode())
    for worker, why in sorted(skipped.items()):
        digest.update(f"skipped\0{worker}\0{why}\0".encode())
    return digest.hexdigest()


def _prepared(store: TraceProvider, spec: ViewSpec, file: TraceFile) -> Any:
    table = store.table(file)
    if spec.prepare is not None:
        store.prepare(file, table, spec.prepare)
    return table


# -- two worker spans ---------------------------------------------------------------------------


def _pair(store: TraceProvider, request: wrappers.Request, spec: ViewSpec) -> wrappers.Response:
    query = Query(request)
    sides = [(query.text(f"{p}run"), query.text(f"{p}worker"), query.text(f"{p}span"))
             for p in ("", "exp_")]
    options = _options(query, spec)
    fmt = output_format(query, spec)
    store.want(*sides)  # both sides first in the parse queue, whichever answers 202
    base, exp = (store.usable_file(*side) for side in sides)

    def payload() -> Any:
        return spec.build(store.table(base), store.table(exp), options)

    memo = (spec.name, base.identity, exp.identity, spec.payload_key(options))
    return send_payload(request, store, spec, payload, fmt=fmt, memo=memo,
                        name=(*sides[0], spec.name))


# -- memory-timeline exports --------------------------------------------------------------------


def _export(store: TraceProvider, request: wrappers.Request, spec: ViewSpec) -> wrappers.Response:
    query = Query(request)
    run = query.text("run")
    worker, span = query.text("worker", required=False), query.text("span", required=False)
    options = _options(query, spec)
    fmt = output_format(query, spec)
    if (worker is None) != (span is None):
        raise BadRequest("give both worker and span, or neither (a run's only export)")
    if worker is None or span is None:
        return _run_export(store, request, spec, run, options, fmt)
    file = store.usable_file(run, worker, span)
    store.warm(file)
    export = file.memory_timeline
    if export is None:
        raise NotFound(f"no memory-timeline export (*.raw.json.gz) for worker {worker[:120]!r} "
                       f"span {span[:60]!r}")
    [export] = _servable([export])
    key = spec.payload_key(options, export=export.identity())

    def payload() -> Any:
        return store.payload(file, key, lambda table: spec.build(table, export, options),
                             spec.payload)

    return send_payload(request, store, spec, payload, fmt=fmt, memo=(file.identity, key),
                        name=(run, worker, span, "memory-timeline"))


def _run_export(store: TraceProvider, request: wrappers.Request, spec: ViewSpec, run: str,
                options: Any, fmt: str) -> wrappers.Response:
    exports = store.memory_exports(run)
    if not exports:
        raise NotFound(f"run {run[:120]!r} has no memory-timeline export")
    if len(exports) > 1:
        raise BadRequest(f"run {run[:120]!r} has {len(exports)} memory-timeline exports: give "
                         "worker and span to pick the one of a span")
    [export] = _servable(exports)

    def payload() -> Any:
        return spec.build(None, export, options)

    key = spec.payload_key(options, export=export.identity())
    return send_payload(request, store, spec, payload, fmt=fmt, memo=(key,),
                        name=(run, "memory-timeline"))


def _servable(refs: list[FileRef]) -> list[FileRef]:
    """The files that may be read as data as they are now (a file swapped for a link out of
    the logdir since the scan may not, and is never answered from a memo or the cache);
    `Unreadable` with the first reason when none may."""
    usable, reasons = [], []
    for ref in refs:
        try:
            check_servable(ref)
        except OSError as exc:
            reasons.append(f"{ref.name[:200]}: refused: {exc}")
            continue
        usable.append(ref)
    if not usable:
        raise Unreadable(reasons[0])
    return usable


# -- allocator snapshots -----------------------------------------------------------------------


def _snapshot(store: TraceProvider, request: wrappers.Request, spec: ViewSpec
              ) -> wrappers.Response:
    query = Query(request)
    run = query.text("run")
    worker, span = query.text("worker", required=False), query.text("span", required=False)
    options = _options(query, spec)
    fmt = output_format(query, spec)
    if (worker is None) != (span is None):
        raise BadRequest("give both worker and span, or neither (the snapshot on its own clock)")
    snapshots = store.memory_snapshots(run)
    if not snapshots:
        raise NotFound(f"run {run[:120]!r} has no allocator snapshot (*.pickle, "
                       "*snapshot*.pkl)")
    file = None if worker is None or span is None else store.usable_file(run, worker, span)
    if options.snapshot is not None:
        ref = next((r for r in snapshots if r.name == options.snapshot), None)
        if ref is None:
            raise NotFound(f"no snapshot {options.snapshot[:120]!r} in run {run[:120]!r}")
        candidates = [ref]
    else:  # the one named after the trace, else the one of its period (the builder decides)
        paired = matching_snapshot(file.name, snapshots) if file is not None else None
        candidates = [paired] if paired is not None else snapshots
    candidates = _servable(candidates)
    source = (candidates, [r.name for r in snapshots])
    key = spec.payload_key(options, snapshot="|".join(r.identity() for r in candidates))
    if file is None:
        return send_payload(request, store, spec, lambda: spec.build(None, source, options),
                            fmt=fmt, memo=(key,), name=(run, "memory-snapshot"))
    traced = file

    def payload() -> Any:
        if spec.cache(options) == DISK:
            return store.payload(traced, key, lambda table: spec.build(table, source, options),
                                 spec.payload)
        return spec.build(store.table(traced), source, options)

    return send_payload(request, store, spec, payload, fmt=fmt, memo=(traced.identity, key),
                        name=(run, worker or "", span or "", "memory-snapshot"))


# -- raw trace download -------------------------------------------------------------------------


def trace_download(store: TraceProvider, request: wrappers.Request) -> wrappers.Response:
    """The file as stored (gzip or JSON), whatever its parse state: nothing is decoded.

    `http_util.Respond` makes the response (nosniff, no-cache headers) around an empty body,
    then the file is streamed in its place: Respond only takes a body held in memory, and a
    trace may be gigabytes. HEAD too: werkzeug sends no body and closes the stream."""
    query = Query(request)
    ref = store.source(query.text("run"), query.text("worker"), query.text("span"))
    name = _UNSAFE_NAME.sub("_", ref.name).strip("._")[:200] or "trace.json"
    disposition = ("Content-Disposition", f'attachment; filename="{name}"')
    handle, size = _open(ref)
    response = http_util.Respond(request, b"", "application/octet-stream",
                                 headers=[disposition])
    response.content_type = "application/gzip" if ref.path.endswith(".gz") else JSON
    response.response = _Stream(handle, size)
    response.headers["Content-Length"] = str(size)
    response.direct_passthrough = True
    return response


def _open(ref: FileRef) -> tuple[Any, int]:
    try:
        handle = open_to_serve(ref)
    except FileNotFoundError as exc:
        raise NotFound("the trace file is gone (removed since the last scan)") from exc
    except PermissionError as exc:  # unreadable, or outside the logdir (OutsideLogdir)
        raise Forbidden(f"the trace file cannot be served: {exc}") from exc
    except NotRegularFile as exc:
        raise Forbidden(f"the trace file cannot be served: {exc}") from exc
    except OSError as exc:
        raise NotFound(f"the trace file cannot be read: {exc}") from exc
    return handle, _size(handle, ref)


def _size(handle: Any, ref: FileRef) -> int:
    """The size of what is being read now (the file may have changed since the scan)."""
    size = getattr(handle, "size", None)
    if isinstance(size, int):
        return size
    try:
        return os.fstat(handle.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        return int(ref.fs.size(ref.path))


class _Stream:
    """The first `size` bytes of an open file, in chunks; closes the file when done."""

    def __init__(self, handle: Any, size: int) -> None:
        self._handle, self._left = handle, size

    def __iter__(self) -> Iterator[bytes]:
        try:
            while self._left > 0:
                chunk = self._handle.read(min(DOWNLOAD_CHUNK, self._left))
                if not chunk:
                    break
                self._left -= len(chunk)
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        self._handle.close()
