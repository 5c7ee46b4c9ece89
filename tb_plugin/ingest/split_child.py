"""The child's side of a split parse (see parallel.py): parse the second half of a file.

The child reads the header itself (it gives the depth of the events array), skips to the
plan's `mid` (a seek for plain JSON, gunzipping the first half for gzip), finds the first
`}, {` after it, reports the offset B of that `{` at once, and parses from B to the end of the
file as if inside the events array. When the parent accepts B it ships its columns back over
the pipe, one raw buffer at a time, freeing each as it goes.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..children import die_with_parent
from ..heap import release_free_memory
from ..storage import CHUNK_SIZE, iter_decompressed
from .decode import try_decode_batch
from .parse import TraceParse
from .scanner import EventStreamScanner
from .schema import TABLE_COLUMNS

#: A candidate event boundary: the `{` of `}, {` (B is the offset of that `{`).
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_BOUNDARY_SPAN = 64  # a candidate straddling two chunks is found if it is at most this long
_TRIM_EVERY = 16 << 20  # the child gives freed memory back to the OS every this many bytes sent

#: The order in which the child ships its columns and the parent receives them.
COLUMN_ORDER = [(table, column) for table, columns in TABLE_COLUMNS.items()
                for column in columns]


@dataclass(frozen=True)
class SplitPlan:
    path: str  # local path, opened again by the child
    gzip: bool
    mid: int  # uncompressed offset from which the child looks for its first event


class _Unsplittable(Exception):
    """The child found no place to start (header too long, file shorter than expected...)."""


def wire_dtype(table: str, column: str) -> str:
    dtype = TABLE_COLUMNS[table][column]
    return "int32" if dtype == "category" else dtype


def child_main(conn: Any, plan: SplitPlan) -> None:
    """Entry point of the child process: never raises, reports to the parent instead."""
    die_with_parent()  # no helper left growing when the CLI or the parser is killed
    try:
        parse = _parse_second_half(conn, plan)
        if conn.recv() == "send":  # the parent accepted our boundary
            _send_part(conn, parse)
    except _Unsplittable as exc:
        _send_quietly(conn, ("unsplittable", str(exc)))
    except EOFError:  # the parent went away or gave up on us
        pass
    except BaseException as exc:
        _send_quietly(conn, ("failed", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def _parse_second_half(conn: Any, plan: SplitPlan) -> TraceParse:
    parse = TraceParse(record=True)
    with open(plan.path, "rb") as handle:
        depth, start, stream = _stream_from_middle(handle, plan, parse.truncated_gzip)
        boundary, first = _find_boundary(stream, start)
        conn.send(("boundary", boundary))
        parse.scanner = EventStreamScanner.resume(try_decode_batch, depth)
        parse.feed(first)
        del first
        parse.consume(stream, lambda done: conn.send(("progress", done)))
    return parse


def _stream_from_middle(handle: Any, plan: SplitPlan, on_truncated_gzip: Callable[..., None]
                        ) -> tuple[int, int, Iterator[bytes]]:
    """(depth of the events array, start, the uncompressed stream from offset start on): start
    is `plan.mid`, or the end of the header if that is further (small files, big headers)."""
    chunks = iter_decompressed(handle, on_truncated_gzip=on_truncated_gzip)
    header = EventStreamScanner()
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


def _find_boundary(stream: Iterator[bytes], start: int) -> tuple[int, bytes]:
    """(B, the stream's bytes from B up to where we read): B is the `{` of the first `}, {`."""
    window = bytearray()
    for chunk in stream:
        search_from = max(0, len(window) - _BOUNDARY_SPAN)
        window += chunk
        match = _BOUNDARY.search(window, search_from)
        if match:
            at = match.end() - 1
            return start + at, bytes(window[at:])
    raise _Unsplittable("no event boundary after the middle of the file")


def _send_part(conn: Any, parse: TraceParse) -> None:
    builder, scan, status = parse.builder, parse.scanner.result, parse.status
    summary = {
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
