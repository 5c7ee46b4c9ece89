"""Routes over more than one parsed worker span, or over raw files: thin adapters that look the
files up in the store and call the same `analysis.report` builders as the CLI.

- `/distributed?run&span`: every usable worker's file of that span index (202 while any of them
  is still loading; broken workers and workers without that span are left out with a message);
- `/diff?run&worker&span&exp_run&exp_worker&exp_span[&path]`: two files (202 if either loads);
- `/memory/timeline?run[&worker&span]`: the memory-timeline export paired with that span (else
  the run's only unpaired export), on the trace's clock; without worker and span, the run's only
  export on its own clock (a run that holds exports but no trace);
- `/trace/download?run&worker&span`: the trace file's bytes as stored, streamed.

Payloads of several files are kept only in the in-memory body LRU, keyed by every file's
identity; the memory timeline of a span is cached on disk next to that span's trace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any, Callable, Optional

from werkzeug import wrappers

from ..storage import FileRef
from .api import CSV, JSON, Query, encode_json, gzip_response, gzipped, json_response
from .errors import BadRequest, NotFound
from .routes import rows_table
from .store import FileState, RunStore
from .tabular import Table, csv_filename, to_csv

Handler = Callable[[RunStore, wrappers.Request], wrappers.Response]
DOWNLOAD_CHUNK = 1 << 20
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


# -- responses ----------------------------------------------------------------------------------


def output_format(query: Query, table: Optional[Callable[[Any], Table]]) -> str:
    """`format`: json (default) or csv, the latter only for routes with a table."""
    fmt = query.choice("format", ("json", "csv"), "json")
    if fmt == "csv" and table is None:
        raise BadRequest("this route has no CSV form; omit format or use format=json")
    return fmt


def send_payload(request: wrappers.Request, store: RunStore, payload: Callable[[], Any], *,
                 fmt: str, memo: Optional[tuple], table: Optional[Callable[[Any], Table]],
                 name: tuple[str, ...]) -> wrappers.Response:
    """JSON, or CSV for `fmt` "csv" (see `output_format`). With `memo`, encoded bodies are kept
    in the store's body LRU under that key; without, every request encodes anew."""
    if fmt == "csv" and table is not None:

        def make_csv() -> bytes:
            return gzipped(to_csv(table(payload())))

        body = store.memo_body((*memo, "csv"), make_csv) if memo else make_csv()
        headers = [("Content-Disposition", f'attachment; filename="{csv_filename(*name)}"')]
        return gzip_response(request, body, CSV, headers)
    if memo is None:
        return json_response(request, payload())  # Respond gzips it when the client accepts
    body = store.memo_body((*memo, "json"), lambda: gzipped(encode_json(payload())))
    return gzip_response(request, body, JSON)


# -- distributed --------------------------------------------------------------------------------


def distributed(store: RunStore, request: wrappers.Request) -> wrappers.Response:
    query = Query(request)
    run, span = query.text("run"), query.text("span")
    table = rows_table("distributed")
    fmt = output_format(query, table)
    if "Distributed" not in store.views(run):
        raise NotFound(f"run {run[:120]!r} has no Distributed view (no worker has "
                       "communication ops)")
    files, skipped = store.span_files(run, span)

    def payload() -> Any:
        from ..analysis.report import build_distributed_view

        tables = {worker: store.table(state) for worker, state in files.items()}
        return build_distributed_view(tables, skipped)

    memo = ("distributed", *sorted((w, f.identity) for w, f in files.items()),
            *sorted(skipped.items()))
    return send_payload(request, store, payload, fmt=fmt, memo=memo, table=table,
                        name=(run, span, "distributed"))


# -- diff ---------------------------------------------------------------------------------------


def diff(store: RunStore, request: wrappers.Request) -> wrappers.Response:
    query = Query(request)
    sides = [(query.text(f"{p}run"), query.text(f"{p}worker"), query.text(f"{p}span"))
             for p in ("", "exp_")]
    path = query.text("path", required=False) or "0"
    table = rows_table("diff")
    fmt = output_format(query, table)
    states = [store.file(*side) for side in sides]
    store.want(*states)  # both sides first in the parse queue, whichever answers 202
    base, exp = (store.usable(state, side[1], side[2]) for state, side in zip(states, sides))

    def payload() -> Any:
        from ..analysis.diff import UnknownDiffPathError
        from ..analysis.report import build_diff_view

        try:
            return build_diff_view(store.table(base), store.table(exp), path)
        except UnknownDiffPathError as exc:
            raise NotFound(str(exc.args[0] if exc.args else "no such diff node")[:300]
                           ) from exc

    memo = ("diff", base.identity, exp.identity, path)
    return send_payload(request, store, payload, fmt=fmt, memo=memo, table=table,
                        name=(*sides[0], "diff"))


# -- memory timeline ----------------------------------------------------------------------------


def memory_timeline(store: RunStore, request: wrappers.Request) -> wrappers.Response:
    query = Query(request)
    run = query.text("run")
    worker, span = query.text("worker", required=False), query.text("span", required=False)
    fmt = output_format(query, rows_table("memory_timeline"))
    if (worker is None) != (span is None):
        raise BadRequest("give both worker and span, or neither (a run's only export)")
    if worker is None or span is None:
        return _run_export(store, request, run, fmt)
    state = store.usable_file(run, worker, span)
    store.warm(state)
    export = state.memory_timeline
    if export is None:
        raise NotFound(f"no memory-timeline export (*.raw.json.gz) for worker {worker[:120]!r} "
                       f"span {span[:60]!r}")

    def payload() -> Any:
        from ..analysis.report import build_view

        key = f"torch-prof-server/memory/timeline?{export.identity()}#{_fingerprint()}"
        return store.payload(state, key, lambda table: build_view(
            table, "memory_timeline", source=export))

    return send_payload(request, store, payload, fmt=fmt,
                        memo=(state.identity, "memory/timeline", export.identity()),
                        table=rows_table("memory_timeline"),
                        name=(run, worker, span, "memory-timeline"))


def _run_export(store: RunStore, request: wrappers.Request, run: str, fmt: str
                ) -> wrappers.Response:
    exports = store.memory_exports(run)
    if not exports:
        raise NotFound(f"run {run[:120]!r} has no memory-timeline export")
    if len(exports) > 1:
        raise BadRequest(f"run {run[:120]!r} has {len(exports)} memory-timeline exports: give "
                         "worker and span to pick the one of a span")
    export = exports[0]

    def payload() -> Any:
        from ..analysis.report import build_view

        return build_view(None, "memory_timeline", source=export)

    return send_payload(request, store, payload, fmt=fmt,
                        memo=("memory/timeline", export.identity()),
                        table=rows_table("memory_timeline"), name=(run, "memory-timeline"))


def _fingerprint() -> str:
    from .routes import analysis_fingerprint

    return analysis_fingerprint()


# -- raw trace download -------------------------------------------------------------------------


def trace_download(store: RunStore, request: wrappers.Request) -> wrappers.Response:
    """The file as stored (gzip or JSON), whatever its parse state: nothing is decoded."""
    query = Query(request)
    state = store.file(query.text("run"), query.text("worker"), query.text("span"))
    ref = state.ref
    gz = ref.path.endswith(".gz")
    name = _UNSAFE_NAME.sub("_", ref.name).strip("._")[:200] or "trace.json"
    headers = {
        "Content-Disposition": f'attachment; filename="{name}"',
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-cache, must-revalidate",
        "Expires": "0",
    }
    kind = "application/gzip" if gz else "application/json"
    handle, size = _open(state)  # HEAD too: werkzeug sends no body and closes the stream
    headers["Content-Length"] = str(size)
    return wrappers.Response(_Stream(handle, size), headers=headers, content_type=kind,
                             direct_passthrough=True)


def _open(state: FileState) -> tuple[Any, int]:
    ref: FileRef = state.ref
    try:
        handle = ref.open()
    except FileNotFoundError as exc:
        raise NotFound("the trace file is gone (removed since the last scan)") from exc
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


HANDLERS: dict[str, Handler] = {
    "/distributed": distributed,
    "/diff": diff,
    "/memory/timeline": memory_timeline,
    "/trace/download": trace_download,
}
