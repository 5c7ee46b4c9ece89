"""Parse one big trace file with two processes: this one the first half, a child the second.

Parsing is CPU-bound (msgspec decode + numpy columns, ~75 MB/s on one core) and a trace is one
file, so a second core only helps if the file itself is split:

- The parent picks `mid`, half the uncompressed size, and starts a child process.
- The child reads the header itself (it gives the depth of the events array), skips to `mid`
  (a seek for plain JSON, gunzipping the first half for gzip), finds the first `}, {` after
  it, reports the offset B of that `{` at once, and parses from B to the end of the file as if
  inside the events array.
- The parent parses from the start, stops feeding its scanner at exactly B and checks that it
  is between two events of the array there. B is only a candidate: `}, {` may sit inside a
  string or a nested value, or after the end of the array. If the check passes, the parent
  takes the child's columns and appends them after its own; if not, or if the child fails or
  is slow, the parent kills it and parses on alone as if nothing happened.

The merged table is exactly the sequential parse's: events are decoded one by one whatever the
batch cuts, interners hand out codes in order of first appearance (interning.Interner), problems
are capped per file (parse.TraceParse), and the child's status changes are replayed in order.

Columns come back over the pipe as raw bytes, one column at a time (no pickle copy; measured
cheaper than an .npz in a temporary folder), and only after the parent accepted the boundary.
This module is the parent's side (deciding, starting, merging); split_child.py is the child's.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
from fsspec.implementations.local import LocalFileSystem

from ..compression import GZIP_MAGIC
from ..settings import settings, usable_cpus
from ..storage import FileRef
from .parse import ProgressCallback, TraceParse
from .split_child import COLUMN_ORDER, SplitPlan, child_main, wire_dtype

log = logging.getLogger(__name__)

#: Below this uncompressed size a second process costs more than it saves.
SPLIT_MIN_BYTES = 64 << 20
#: Once the parent needs B it waits this long at least (the child only has to skip to `mid`,
#: which takes a fraction of the time the parent took to parse its way there).
_BOUNDARY_WAIT_S = 5.0
#: A child that sends nothing (it reports progress every chunk) for this long is stuck.
_SILENCE_LIMIT_S = 60.0
_GZIP_SIZE_LIMIT = 1 << 32  # the gzip trailer holds the size mod 2**32


# -- deciding -----------------------------------------------------------------------------------


def wanted_processes(processes: Optional[int]) -> int:
    """The `processes` argument, else $TORCH_PROF_PARSE_PROCESSES (settings), else 2."""
    return processes if processes is not None else settings().parse_processes


def plan_split(ref: FileRef, processes: Optional[int] = None,
               min_bytes: Optional[int] = None) -> Optional[SplitPlan]:
    """Where to split `ref`, or None to parse it in this process only."""
    if wanted_processes(processes) < 2 or usable_cpus() < 2:
        return None
    # Remote files stay sequential: the child would download (half) the file a second time.
    if not isinstance(ref.fs, LocalFileSystem):
        return None
    sized = uncompressed_size(ref.path)
    if sized is None:
        return None
    size, gzipped = sized
    if size < (SPLIT_MIN_BYTES if min_bytes is None else max(min_bytes, 1)):
        return None
    return SplitPlan(ref.path, gzipped, size // 2)


def uncompressed_size(path: str) -> Optional[tuple[int, bool]]:
    """(bytes of JSON, is gzip); for gzip from its trailer, when that can be trusted."""
    try:
        with open(path, "rb") as handle:
            magic = handle.read(2)
            size = os.fstat(handle.fileno()).st_size
            if magic != GZIP_MAGIC:
                return size, False
            if size < 18 or size >= _GZIP_SIZE_LIMIT:
                return None
            handle.seek(-4, os.SEEK_END)
            isize = int.from_bytes(handle.read(4), "little")
    except OSError:
        return None
    # Smaller than the compressed file: the JSON is >= 4 GiB (the field wrapped), or the file
    # is truncated or multi-member. A wrong size would only unbalance the halves, but then we
    # do not know it is big enough to be worth a process.
    return (isize, True) if isize >= size else None


def _start_method() -> str:
    # fork: the child starts at once with everything imported (spawn re-imports numpy and
    # pandas, ~1 s). Not on macOS, where fork is unsafe with system frameworks.
    if "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin":
        return "fork"
    return "spawn"


# -- the parent's side --------------------------------------------------------------------------


@dataclass
class _ChildPart:
    """What the child parsed, as shipped: everything of its `TraceParse` but the scanner."""

    categories: dict[str, list[str]]
    event_rows: int
    negative_durations: int
    missing_timestamps: int
    process_metadata: list[dict[str, Any]]
    record: list[tuple[str, str]]
    problems: int
    skipped_events: int
    bytes_read: int
    trailer: bytes
    events_closed: bool
    leftover: bytes
    peak_rss_mb: float  # the child's, for the debug log (memory is half the point)
    columns: Optional[list[np.ndarray]] = None  # received after the summary, in COLUMN_ORDER


class SplitJob:
    """A running child parsing the second half of a file, seen from the parent."""

    def __init__(self, process: Any, conn: Any, plan: SplitPlan) -> None:
        self.process = process
        self.conn = conn
        self.plan = plan
        self.boundary: Optional[int] = None
        self.child_bytes = 0  # the child's progress, for the progress callback
        self.failure: Optional[str] = None
        self._part: Optional[_ChildPart] = None
        self._started = time.monotonic()

    @classmethod
    def start(cls, ref: FileRef, *, processes: Optional[int] = None,
              min_bytes: Optional[int] = None) -> Optional[SplitJob]:
        """A child parsing the second half of `ref`, or None to parse it alone."""
        plan = plan_split(ref, processes, min_bytes)
        if plan is None:
            return None
        if multiprocessing.current_process().daemon:  # e.g. a multiprocessing.Pool worker
            log.debug("not splitting %s: daemonic processes cannot have children", ref.path)
            return None
        try:
            process, conn = _start_child(plan)
        except Exception as exc:  # no process to be had: parse alone
            log.debug("not splitting %s: cannot start a child (%s)", ref.path, exc)
            return None
        log.debug("parsing %s in two processes, the child from byte %d", ref.path, plan.mid)
        return cls(process, conn, plan)

    def parse_first_half(self, parse: TraceParse, chunks: Iterator[bytes],
                         progress: Optional[ProgressCallback]) -> bool:
        """Feed `parse` up to the child's boundary, then merge the child's part into it.

        True: `parse` holds the whole file (only `parse.table()` is left to do). False: the
        split failed and `parse` is exactly where a sequential parse would be after the chunks
        consumed so far; the caller goes on with the rest of `chunks`.
        """
        offset = 0
        for chunk in chunks:
            end = offset + len(chunk)
            cut = self._wait_boundary() if end > self.plan.mid else None  # B >= mid
            if cut is not None and offset <= cut < end:
                return self._split_at(parse, chunk, cut - offset, progress)
            parse.feed(chunk)
            offset = end
            self._pump()
            if self.failure is not None:
                self.stop()
                return False
            _report(progress, parse.status.bytes_read + self.child_bytes)
        return False  # the stream ended before B: the caller only has to close it

    def _split_at(self, parse: TraceParse, chunk: bytes, at: int,
                  progress: Optional[ProgressCallback]) -> bool:
        parse.feed(chunk[:at])
        if not parse.cut_at_boundary():
            self._fail(f"byte {self.boundary} is not between two events")
        part = self._receive(parse, progress) if self.failure is None else None
        if part is None:
            self.stop()
            parse.feed(chunk[at:])
            return False
        _merge(parse, part)
        _report(progress, parse.status.bytes_read)
        log.debug("merged the child's %d events from byte %d (child peak RSS %.0f MB)",
                  part.event_rows, self.boundary, part.peak_rss_mb)
        return True

    def stop(self) -> None:
        """End the child (killed if still running) and release it; idempotent."""
        if self.process is None:
            return
        if self.process.is_alive():  # still parsing, stuck, or done and exiting: no matter
            self.process.terminate()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()
        self.process.close()
        self.process = None

    # -- messages -------------------------------------------------------------------------------

    def _wait_boundary(self) -> Optional[int]:
        if self.boundary is None and self.failure is None:
            patience = max(_BOUNDARY_WAIT_S, 0.5 * (time.monotonic() - self._started))
            deadline = time.monotonic() + patience
            while self.boundary is None and self.failure is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._fail(f"no boundary from the child after {patience:.0f} s")
                    break
                self._pump(timeout=left)
        return self.boundary if self.failure is None else None

    def _receive(self, parse: TraceParse, progress: Optional[ProgressCallback]
                 ) -> Optional[_ChildPart]:
        """Ask for the child's part and wait for it (it may still be parsing)."""
        try:
            self.conn.send("send")
            while self._part is None and self.failure is None:
                if not self._pump(timeout=_SILENCE_LIMIT_S):
                    self._fail(f"the child was silent for {_SILENCE_LIMIT_S:.0f} s")
                _report(progress, parse.status.bytes_read + self.child_bytes)
            if self._part is None:
                return None
            self._part.columns = [self._receive_column(table, column)
                                  for table, column in COLUMN_ORDER]
        except (EOFError, OSError, _ChildSilent) as exc:
            self._fail(f"receiving the child's columns failed: {exc!r}")
            return None
        return self._part

    def _receive_column(self, table: str, column: str) -> np.ndarray:
        if not self.conn.poll(_SILENCE_LIMIT_S):
            raise _ChildSilent(f"{table}.{column}")
        return np.frombuffer(self.conn.recv_bytes(), dtype=wire_dtype(table, column))

    def _pump(self, timeout: float = 0.0) -> bool:
        """Handle the child's waiting messages (waiting up to `timeout` for the first);
        False if none came."""
        got = False
        try:
            while self.failure is None and self._part is None and self.conn.poll(timeout):
                self._handle(self.conn.recv())
                got, timeout = True, 0.0
        except (EOFError, OSError) as exc:  # the child is gone without a word
            self._fail(f"the child exited ({exc!r})")
            return True
        return got

    def _handle(self, message: tuple[str, Any]) -> None:
        kind, value = message
        if kind == "boundary":
            self.boundary = int(value)
        elif kind == "progress":
            self.child_bytes = int(value)
        elif kind == "part":
            self._part = _ChildPart(**value)
        elif kind == "unsplittable":
            self._fail(str(value))
        else:  # "failed": a bug or an I/O error in the child; we will meet it ourselves
            log.warning("the parse child for %s failed: %s", self.plan.path, value)
            self._fail(str(value))

    def _fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
            self.child_bytes = 0
            log.debug("parsing %s alone: %s", self.plan.path, why)


class _ChildSilent(Exception):
    pass


def _report(progress: Optional[ProgressCallback], done: int) -> None:
    if progress is not None:
        progress(done)


def _merge(parse: TraceParse, part: _ChildPart) -> None:
    """Append the child's part (the rest of the file) to `parse`, as if parse had read it."""
    builder = parse.builder
    luts = builder.category_luts(part.categories)
    base = builder.event_rows
    columns, part.columns = part.columns or [], None
    for table, column in COLUMN_ORDER:  # each received column is released once appended
        builder.append_part_column(table, column, columns.pop(0), luts, base)
    builder.event_rows += part.event_rows
    builder.negative_durations += part.negative_durations
    builder.missing_timestamps += part.missing_timestamps
    builder.process_metadata.extend(part.process_metadata)
    parse.status.bytes_read += part.bytes_read
    parse.status.skipped_events += part.skipped_events
    parse.replay(part.record, part.problems)
    scan = parse.scanner.result  # the child saw the end of the file
    scan.trailer, scan.events_closed, scan.leftover = (part.trailer, part.events_closed,
                                                       part.leftover)


def _start_child(plan: SplitPlan) -> tuple[Any, Any]:
    method = _start_method()
    context = multiprocessing.get_context(method)
    parent_conn, child_conn = context.Pipe(duplex=True)
    process = context.Process(target=child_main, args=(child_conn, plan), daemon=True,
                              name="torch-prof-parse")
    # Frozen objects are never visited by the child's garbage collector, so the child does not
    # copy-on-write the parent's whole heap (a server holding other tables) page by page.
    if method == "fork":
        gc.freeze()
    try:
        process.start()
    except BaseException:
        parent_conn.close()
        raise
    finally:
        if method == "fork":
            gc.unfreeze()
        child_conn.close()  # the child holds its own end; ours must go for EOF to be seen
    return process, parent_conn
