"""A child's side of a split parse (see parallel.py): parse one part of a file.

Child k reads the header itself (it gives the depth of the events array), skips to its plan's
`mid` (a seek for plain JSON, gunzipping what comes before for gzip), finds the first `}, {`
after it, reports the offset B_k of that `{` at once, and parses from B_k as if inside the
events array. The parent answers with every child's B (`ends`); the child stops at the first
of them after its own start where its scanner proves it is between two events (a B that is not
is skipped: that child's part is never used), or at the end of the file. When the parent
reaches B_k it asks for the part, and the child ships its columns back over the pipe, one raw
buffer at a time, freeing each as it goes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable, Optional

from fsspec.implementations.local import LocalFileSystem

from ..children import die_with_parent
from ..heap import release_free_memory
from ..storage import CHUNK_SIZE, iter_decompressed, open_file
from .decode import BatchDecoder
from .parse import Limits, TraceParse
from .scanner import EventStreamScanner
from .schema import TABLE_COLUMNS

#: A candidate event boundary: the `{` of `}, {` (B is the offset of that `{`).
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_BOUNDARY_SPAN = 64  # a candidate straddling two chunks is found if it is at most this long
#: How long a child waits for the parent's `ends` once it needs them.
_ENDS_WAIT_S = 60.0
_TRIM_EVERY = 16 << 20  # the child gives freed memory back to the OS every this many bytes sent

#: The order in which the child ships its columns and the parent receives them.
COLUMN_ORDER = [(table, column) for table, columns in TABLE_COLUMNS.items()
                for column in columns]


@dataclass(frozen=True)
class SplitPlan:
    path: str  # local path, opened again by the child
    gzip: bool
    mid: int  # uncompressed offset from which the child looks for its first event
    #: The next child's `mid`: this child needs the parent's `ends` before it reads past it
    #: (every other child's B after ours is at least there). None: the last child.
    next_mid: Optional[int] = None
    #: The whole file's limits (the parent's); None: the default limits.
    limits: Optional[Limits] = None


def limit_plans(plans: list[SplitPlan], limits: Limits) -> list[SplitPlan]:
    """The plans a parse under `limits` can use: none starting beyond the inflation limit (a
    sequential parse stops before), each carrying the limits to its child."""
    kept = [plan for plan in plans if plan.mid < limits.max_bytes]
    return [dataclasses.replace(plan, limits=limits,
                                next_mid=plan.next_mid if i + 1 < len(kept) else None)
            for i, plan in enumerate(kept)]


class _Unsplittable(Exception):
    """The child found no place to start (header too long, file shorter than expected...)."""


def wire_dtype(table: str, column: str) -> str:
    dtype = TABLE_COLUMNS[table][column]
    return "int32" if dtype == "category" else dtype


def child_main(conn: Any, plan: SplitPlan) -> None:
    """Entry point of the child process: never raises, reports to the parent instead."""
    die_with_parent()  # no helper left growing when the CLI or the parser is killed
    try:
        parse, end = _parse_part(conn, plan)
        if _wait_for_send(conn):  # the parent reached our boundary and accepted it
            _send_part(conn, parse, end)
    except _Unsplittable as exc:
        _send_quietly(conn, ("unsplittable", str(exc)))
    except EOFError:  # the parent went away or gave up on us
        pass
    except BaseException as exc:
        _send_quietly(conn, ("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _parse_part(conn: Any, plan: SplitPlan) -> tuple[TraceParse, Optional[int]]:
    """Parse from our boundary to the first proven boundary of a later child (its offset is
    returned) or to the end of the file (None)."""
    parse = TraceParse(record=True, limits=plan.limits)
    with open_file(LocalFileSystem(), plan.path) as handle:  # a regular file only
        depth, start, stream = _stream_from_middle(handle, plan, parse.truncated_gzip,
                                                   parse.limits.max_token)
        boundary, first = _find_boundary(stream, start, parse.limits.max_token)
        conn.send(("boundary", boundary))
        # the bytes before our boundary count against the whole file's inflation limit
        parse.limits = dataclasses.replace(
            parse.limits, max_bytes=max(0, parse.limits.max_bytes - boundary))
        parse.scanner = EventStreamScanner.resume(BatchDecoder(), depth,
                                                  parse.limits.max_token)
        ends = _Ends(conn, boundary, plan.next_mid)
        offset = boundary
        for chunk in itertools.chain((first,), stream):
            while chunk:
                stop = offset + len(chunk)
                target = ends.first_before(stop)
                if target is None:
                    parse.feed(chunk)
                    offset = stop
                    break
                parse.feed(chunk[: target - offset])
                chunk, offset = chunk[target - offset:], target
                if parse.cut_at_boundary():
                    return parse, target
                ends.drop_first()  # not between two events: that child's part is never used
            del chunk
            conn.send(("progress", parse.status.bytes_read))
        del first
        parse.close()
    return parse, None


def _wait_for_send(conn: Any) -> bool:
    """Wait for the parent's "send" (an `ends` we did not need may come first)."""
    while True:
        message = conn.recv()
        if message == "send":
            return True
        if not (isinstance(message, tuple) and message[0] == "ends"):
            return False


class _Ends:
    """The later children's boundaries, from the parent's `ends` message (read when needed)."""

    def __init__(self, conn: Any, start: int, next_mid: Optional[int]) -> None:
        self._conn, self._start, self._next_mid = conn, start, next_mid
        self._targets: Optional[list[int]] = None if next_mid is not None else []

    def first_before(self, stop: int) -> Optional[int]:
        """The first boundary before `stop` (the end of the bytes about to be fed), or None."""
        if self._targets is None:
            must = self._next_mid is not None and stop > self._next_mid
            if not self._conn.poll(_ENDS_WAIT_S if must else 0):
                if must:  # the parent went quiet: it will not use us
                    raise EOFError("no boundaries from the parent")
                return None
            kind, value = self._conn.recv()
            if kind != "ends":
                raise EOFError(f"unexpected message {kind!r}")
            self._targets = sorted(b for b in value if b > self._start)
        return self._targets[0] if self._targets and self._targets[0] < stop else None

    def drop_first(self) -> None:
        if self._targets:
            self._targets.pop(0)


def _stream_from_middle(handle: Any, plan: SplitPlan, on_truncated_gzip: Callable[..., None],
                        max_token: int) -> tuple[int, int, Iterator[bytes]]:
    """(depth of the events array, start, the uncompressed stream from offset start on): start
    is `plan.mid`, or the end of the header if that is further (small files, big headers)."""
    chunks = iter_decompressed(handle, on_truncated_gzip=on_truncated_gzip)
    header = EventStreamScanner(max_token=max_token)
    offset = 0
    for chunk in chunks:
        offset += len(chunk)
        if header.feed_header(chunk):
            break
        if offset >= plan.mid:
            raise _Unsplittable("the header reaches the middle of the file")
    else:
        raise _Unsplittable("no events array")
    depth, start = header.array_depth, max(plan.mid, len(header.result.header))
    del header
    if not plan.gzip:
        handle.seek(start)
        return depth, start, iter(lambda: handle.read(CHUNK_SIZE), b"")
    return depth, start, _skip_to(chunk, offset - len(chunk), chunks, start)


def _skip_to(first: bytes, offset: int, rest: Iterator[bytes], start: int) -> Iterator[bytes]:
    """The stream (`first` at `offset`, then `rest`) from offset `start` on."""
    chunk: Optional[bytes] = first
    while chunk is not None:
        end = offset + len(chunk)
        if end > start:
            yield chunk[max(0, start - offset):]
        offset = end
        chunk = next(rest, None)


def _find_boundary(stream: Iterator[bytes], start: int, max_token: int) -> tuple[int, bytes]:
    """(B, the stream's bytes from B up to where we read): B is the `{` of the first `}, {`;
    none within `max_token` bytes (one huge value) leaves the part to the parent."""
    window = bytearray()
    for chunk in stream:
        if len(window) > max_token:
            raise _Unsplittable("no event boundary within the token limit after the middle")
        search_from = max(0, len(window) - _BOUNDARY_SPAN)
        window += chunk
        match = _BOUNDARY.search(window, search_from)
        if match:
            at = match.end() - 1
            return start + at, bytes(window[at:])
    raise _Unsplittable("no event boundary after the middle of the file")


def _send_part(conn: Any, parse: TraceParse, end: Optional[int]) -> None:
    builder, scan, status = parse.builder, parse.scanner.result, parse.status
    summary = {
        "end": end,
        "categories": {key: interner.categories for key, interner in builder.interners.items()},
        "event_rows": builder.event_rows,
        "negative_durations": builder.negative_durations,
        "missing_timestamps": builder.missing_timestamps,
        "process_metadata": builder.process_metadata,
        "record": parse.record or [],
        "problems": parse.problems,
        "skipped_events": status.skipped_events,
        "bytes_read": status.bytes_read,
        "trailer": scan.trailer,
        "events_closed": scan.events_closed,
        "leftover": scan.leftover,
        "peak_rss_mb": _peak_rss_mb(),
    }
    conn.send(("part", summary))
    del summary
    builder.interners.clear()
    # What the parent receives we free, heap trimmed, so that both processes together hold
    # about one copy of the columns, as the sequential parse does, all along the transfer.
    freed = 0
    for table, column in COLUMN_ORDER:
        values = builder.pop_column(table, column).astype(wire_dtype(table, column), copy=False)
        conn.send_bytes(values)  # the array's own buffer: no pickled copy
        freed += values.nbytes
        del values
        if freed >= _TRIM_EVERY:  # after every column: +0.1 s on the 800 MB bench trace
            release_free_memory()
            freed = 0


def _peak_rss_mb() -> float:
    try:
        import resource
    except ImportError:  # Windows
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes vs KiB


def _send_quietly(conn: Any, message: tuple[str, str]) -> None:
    with contextlib.suppress(OSError):  # the parent is gone: nobody to tell
        conn.send(message)
