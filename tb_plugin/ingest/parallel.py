"""Parse one big trace file with N processes: this one the first part, N-1 children the rest.

Parsing is CPU-bound (msgspec decode + numpy columns, ~110 MB/s on one core) and a trace is one
file, so more cores only help if the file itself is split:

- The parent picks N (usable cores, capped by $TORCH_PROF_PARSE_PROCESSES, by parts of at
  least 32 MB and by the available memory) and mids `k * size / N` for k = 1..N-1, and starts
  a child per mid.
- Child k reads the header itself (it gives the depth of the events array), skips to its mid
  (a seek for plain JSON, gunzipping what comes before for gzip), finds the first `}, {` after
  it, reports the offset B_k of that `{` at once, and parses from B_k as if inside the events
  array. The parent sends every child the list of all B (`ends`); child k stops at the first
  B after its own where its scanner proves it is between two events, or at the end of the
  file, and reports where it stopped.
- The parent parses from the start up to the first B and checks that it is between two events
  there. B is only a candidate: `}, {` may sit inside a string or a nested value, or after
  the end of the array. If the check passes, the parent takes that child's columns and
  appends them after its own; it is then where that child stopped, a proven boundary, and
  takes the next child starting there, and so on. A B that fails the check, a child that fails
  or is slow: the parent kills it and parses on by itself from where it is (skipping to it in
  its own stream) up to the next B, as if nothing happened.

The merged table is exactly the sequential parse's: events are decoded one by one whatever the
batch cuts, interners hand out codes in order of first appearance (interning.Interner), problems
are capped per file (parse.TraceParse), and each part's status changes are replayed in order.

Columns come back over the pipe as raw bytes, one column at a time (no pickle copy; measured
cheaper than an .npz in a temporary folder), and only after the parent accepted the boundary.
This module is the parent's side (deciding, starting, merging); split_child.py is the child's.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import multiprocessing.connection
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..storage import FileRef
from .parse import Limits, ProgressCallback, TraceParse
from .split_child import COLUMN_ORDER, SplitPlan, child_main, limit_plans, wire_dtype
from .split_plan import plan_split

log = logging.getLogger(__name__)

#: Once the parent needs the boundaries it waits this long at least (a child only has to skip
#: to its mid, which takes a fraction of the time the parent took to parse its way there).
_BOUNDARY_WAIT_S = 5.0
#: A child that sends nothing (it reports progress every chunk) for this long is stuck.
_SILENCE_LIMIT_S = 60.0


def _start_method() -> str:
    # fork: the child starts at once with everything imported (spawn re-imports numpy and
    # pandas, ~1 s). Not on macOS, where fork is unsafe with system frameworks.
    if "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin":
        return "fork"
    return "spawn"


# -- the parent's side --------------------------------------------------------------------------


@dataclass
class _ChildPart:
    """What a child parsed, as shipped: everything of its `TraceParse` but the scanner."""

    end: Optional[int]  # where the part stops (a later child's proven B), None at end of file
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
    peak_rss_mb: float  # the child's, for the debug log (memory is the point of shipping)
    columns: Optional[list[np.ndarray]] = None  # received after the summary, in COLUMN_ORDER


class _Child:
    """One running child parsing one part of the file, seen from the parent."""

    def __init__(self, process: Any, conn: Any, plan: SplitPlan) -> None:
        self.process = process
        self.conn = conn
        self.plan = plan
        self.boundary: Optional[int] = None
        self.bytes_done = 0  # the child's progress, for the progress callback
        self.failure: Optional[str] = None
        self.part: Optional[_ChildPart] = None

    @property
    def live(self) -> bool:
        return self.failure is None and self.process is not None

    def pump(self, timeout: float = 0.0) -> bool:
        """Handle the child's waiting messages (waiting up to `timeout` for the first);
        False if none came."""
        got = False
        try:
            while self.failure is None and self.part is None and self.conn.poll(timeout):
                self._handle(self.conn.recv())
                got, timeout = True, 0.0
        except (EOFError, OSError) as exc:  # the child is gone without a word
            self.fail(f"the child exited ({exc!r})")
            return True
        return got

    def _handle(self, message: tuple[str, Any]) -> None:
        kind, value = message
        if kind == "boundary":
            self.boundary = int(value)
        elif kind == "progress":
            self.bytes_done = int(value)
        elif kind == "part":
            self.part = _ChildPart(**value)
        elif kind == "unsplittable":
            self.fail(str(value))
        else:  # "failed": a bug or an I/O error in the child; we will meet it ourselves
            log.warning("a parse child for %s failed: %s", self.plan.path, value)
            self.fail(str(value))

    def send(self, message: Any) -> None:
        try:
            self.conn.send(message)
        except OSError as exc:
            self.fail(f"the child exited ({exc!r})")

    def receive(self, report: Any) -> Optional[_ChildPart]:
        """Ask for the child's part and wait for it (it may still be parsing)."""
        try:
            self.conn.send("send")
            while self.part is None and self.failure is None:
                if not self.pump(timeout=_SILENCE_LIMIT_S):
                    self.fail(f"the child was silent for {_SILENCE_LIMIT_S:.0f} s")
                report()
            if self.part is None:
                return None
            self.part.columns = [self._receive_column(table, column)
                                 for table, column in COLUMN_ORDER]
        except (EOFError, OSError, _ChildSilent) as exc:
            self.fail(f"receiving the child's columns failed: {exc!r}")
            return None
        part, self.part = self.part, None
        return part

    def _receive_column(self, table: str, column: str) -> np.ndarray:
        if not self.conn.poll(_SILENCE_LIMIT_S):
            raise _ChildSilent(f"{table}.{column}")
        return np.frombuffer(self.conn.recv_bytes(), dtype=wire_dtype(table, column))

    def fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
            self.bytes_done = 0
            log.debug("not using the child from byte %s of %s (parsed by another process): %s",
                      self.boundary if self.boundary is not None else self.plan.mid,
                      self.plan.path, why)

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


class SplitJob:
    """The children parsing the later parts of one file, and the parent's merging loop."""

    def __init__(self, children: list[_Child]) -> None:
        self.children = children
        self._started = time.monotonic()

    @classmethod
    def start(cls, ref: FileRef, *, processes: Optional[int] = None,
              min_bytes: Optional[int] = None, limits: Optional[Limits] = None,
              configured: Optional[int] = None) -> Optional[SplitJob]:
        """Children parsing the later parts of `ref`, or None to parse it alone. With `limits`
        (the parent's), no child starts beyond the inflation limit and each child stops where
        the whole file's limits would (its failed part is then the parent's, which stops)."""
        plans = plan_split(ref, processes, min_bytes, configured)
        if plans is not None and limits is not None:
            plans = limit_plans(plans, limits)
        if not plans:
            return None
        if multiprocessing.current_process().daemon:  # e.g. a multiprocessing.Pool worker
            log.debug("not splitting %s: daemonic processes cannot have children", ref.path)
            return None
        children = _start_children(plans)
        if not children:
            return None
        log.debug("parsing %s in %d processes, the children from bytes %s", ref.path,
                  len(children) + 1, [child.plan.mid for child in children])
        return cls(children)

    def run(self, parse: TraceParse, chunks: Iterable[bytes],
            progress: Optional[ProgressCallback]) -> None:
        """Parse the whole stream into `parse`: our parts ourselves, the others merged from the
        children whose boundaries we proved; the result is the sequential parse's."""
        stream = _Stream(chunks)
        try:
            whole = self._run(parse, stream, progress)
        finally:
            self.stop()
        if not whole:
            parse.consume(stream, progress)

    def stop(self) -> None:
        """End every child (killed if still running); idempotent."""
        for child in self.children:
            child.stop()

    def _run(self, parse: TraceParse, stream: _Stream, progress: Optional[ProgressCallback]
             ) -> bool:
        """True: `parse` holds the whole file. False: `parse` is exactly where a sequential
        parse would be at `stream.offset`; the caller feeds it the rest of the stream."""
        report = _Reporter(parse, self.children, progress)
        if not self._feed_to(parse, stream, min(c.plan.mid for c in self.children), report):
            return False
        self._collect_boundaries()
        starts: set[int] = set()
        for child in self.children:  # a big header: several children start at the same event
            if child.live and child.boundary in starts:
                child.fail("another child starts at the same byte")
                child.stop()
            starts.add(child.boundary or 0)
        ends = sorted(c.boundary for c in self.children if c.live and c.boundary is not None)
        for child in self.children:
            if child.live:
                child.send(("ends", ends))
        at = stream.offset  # where `parse` is
        while True:
            for child in self.children:  # a child starting inside a merged part is not needed
                if child.live and child.boundary is not None and child.boundary < at:
                    child.fail(f"its byte {child.boundary} is inside another part")
                    child.stop()
            child = min((c for c in self.children if c.live and c.boundary is not None),
                        key=lambda c: c.boundary or 0, default=None)
            if child is None or child.boundary is None:
                stream.skip_to(at)  # the rest is ours (at the end of the stream: nothing)
                return False
            if child.boundary > at:
                if not (stream.skip_to(at) and self._feed_to(parse, stream, child.boundary,
                                                            report)):
                    return False
                at = child.boundary
            if not parse.cut_at_boundary():
                child.fail(f"byte {child.boundary} is not between two events")
                child.stop()
                continue
            part = child.receive(report)
            child.stop()
            if part is None:
                continue
            log.debug("merged the child's %d events from byte %d (child peak RSS %.0f MB)",
                      part.event_rows, child.boundary, part.peak_rss_mb)
            end = part.end
            _merge(parse, part)
            report()
            if end is None:
                return True
            at = end

    def _feed_to(self, parse: TraceParse, stream: _Stream, target: int,
                 report: _Reporter) -> bool:
        """Feed `parse` from the stream up to offset `target`; False if the stream ends first."""
        while stream.offset < target:
            chunk = next(stream, None)
            if chunk is None:
                return False
            if stream.offset > target:
                keep = len(chunk) - (stream.offset - target)
                stream.unread(chunk[keep:])
                chunk = chunk[:keep]
            parse.feed(chunk)
            del chunk
            for child in self.children:
                if child.live:
                    child.pump()
            report()
        return True

    def _collect_boundaries(self) -> None:
        """Wait until every child has reported its boundary or failed (patience bounded)."""
        patience = max(_BOUNDARY_WAIT_S, 0.5 * (time.monotonic() - self._started))
        deadline = time.monotonic() + patience
        while True:
            waiting = [c for c in self.children if c.live and c.boundary is None]
            left = deadline - time.monotonic()
            if not waiting:
                return
            if left <= 0:
                for child in waiting:
                    child.fail(f"no boundary from the child after {patience:.0f} s")
                    child.stop()
                return
            ready = multiprocessing.connection.wait([c.conn for c in waiting], timeout=left)
            for child in waiting:
                if child.conn in ready:
                    child.pump()


class _ChildSilent(Exception):
    pass


class _Stream:
    """The parent's chunks, with their offset; the unfed end of a chunk can be given back."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""
        self.offset = 0  # of the next byte

    def __iter__(self) -> _Stream:
        return self

    def __next__(self) -> bytes:
        if self._pending:
            chunk, self._pending = self._pending, b""
        else:
            chunk = next(self._chunks)
        self.offset += len(chunk)
        return chunk

    def unread(self, tail: bytes) -> None:
        self._pending = tail
        self.offset -= len(tail)

    def skip_to(self, offset: int) -> bool:
        """Drop the bytes before `offset` (where a merged part ended); False at end of stream."""
        while self.offset < offset:
            chunk = next(self, None)
            if chunk is None:
                return False
            if self.offset > offset:
                self.unread(chunk[len(chunk) - (self.offset - offset):])
        return True


class _Reporter:
    """Progress: what the parent parsed (merged parts included) and what live children did."""

    def __init__(self, parse: TraceParse, children: list[_Child],
                 progress: Optional[ProgressCallback]) -> None:
        self._parse, self._children, self._progress = parse, children, progress

    def __call__(self) -> None:
        if self._progress is not None:
            self._progress(self._parse.status.bytes_read
                           + sum(c.bytes_done for c in self._children if c.live))


def _merge(parse: TraceParse, part: _ChildPart) -> None:
    """Append the child's part (the next part of the file) to `parse`, as if parse had read it."""
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
    if part.end is None:  # the child saw the end of the file
        scan = parse.scanner.result
        scan.trailer, scan.events_closed, scan.leftover = (part.trailer, part.events_closed,
                                                           part.leftover)


def _start_children(plans: list[SplitPlan]) -> list[_Child]:
    """A child per plan (fewer if processes cannot be had: their parts are parsed by others)."""
    method = _start_method()
    context = multiprocessing.get_context(method)
    children = []
    # Frozen objects are never visited by the child's garbage collector, so the child does not
    # copy-on-write the parent's whole heap (a server holding other tables) page by page.
    if method == "fork":
        gc.freeze()
    try:
        for plan in plans:
            try:
                process, conn = _start_child(context, plan)
            except Exception as exc:  # no process to be had: others parse its part
                log.debug("cannot start a parse child for %s: %s", plan.path, exc)
                break
            children.append(_Child(process, conn, plan))
    finally:
        if method == "fork":
            gc.unfreeze()
    return children


def _start_child(context: Any, plan: SplitPlan) -> tuple[Any, Any]:
    parent_conn, child_conn = context.Pipe(duplex=True)
    process = context.Process(target=child_main, args=(child_conn, plan), daemon=True,
                              name="torch-prof-parse")
    try:
        process.start()
    except BaseException:
        parent_conn.close()
        raise
    finally:
        child_conn.close()  # the child holds its own end; ours must go for EOF to be seen
    return process, parent_conn
