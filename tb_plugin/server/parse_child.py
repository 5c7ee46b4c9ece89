"""What runs inside a parser process of the `LoadPool`: parse one file for the server.

A child parses one file and returns a small summary (state, messages, feature counts) and the
table as plain arrays (`ingest.plain`): the server keeps the table in memory and writes it to
the `TraceCache` in the background, so nothing on the way to the first view touches the disk
(a table over `HANDOVER_MAX_BYTES` is written to the cache here and read back by the server).
The summary is stored next to the table so that a restarted server knows the file without
parsing it again (`peek_summary`). Progress goes back to the server through a queue handed
over when the child starts. On a Ray cluster, for a file too big to hand over and for the
files of a bulk load (`pool.hands_over`), `parse_store.parse_into_cache` runs instead (the
table, the summary and the view summaries go to the cache from the child). This module is
what every parser process imports before its first file, so it is kept light: ingest and the
per-file summary only (no TensorBoard, no views, no server); the view registry is imported by
the processes that need it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Optional

from ..analysis.features import FEATURES_VERSION, FileSummary, summarize
from ..cache import TraceCache, cache_location
from ..children import die_with_parent
from ..ingest import parse_trace
from ..ingest.plain import PlainTable, to_plain
from ..ingest.schema import LoadState
from ..settings import Settings
from ..storage import FileRef

#: Tables up to this size (their arrays) go to the server through the result pipe; bigger
#: ones through the cache, written here (the pickled copy on each side would double the peak
#: memory of both processes for a multi-GB trace).
HANDOVER_MAX_BYTES = 512 << 20
#: A file with more JSON than this is sent to `parse_store.parse_into_cache` at once (tables
#: hold 0.3-0.5 bytes of arrays per byte of JSON, measured in bench/).
HANDOVER_MAX_JSON_BYTES = 4 * HANDOVER_MAX_BYTES
#: Payload key of the per-file summary stored next to the parsed table.
SUMMARY_KEY = f"torch-prof-server/summary/v{FEATURES_VERSION}"
CHILD_NICENESS = 2  # parsing yields a little to the server's request threads
PROGRESS_EVERY_S = 0.2

_progress_queue: Any = None
log = logging.getLogger(__name__)


def init_child(progress_queue: Any) -> None:
    """The pool's initializer: keep the progress queue, and run a little below the server."""
    global _progress_queue
    die_with_parent()  # no parser left running when TensorBoard is killed
    _progress_queue = progress_queue
    with contextlib.suppress(AttributeError, OSError):
        os.nice(CHILD_NICENESS)


@dataclass
class ParsedFile:
    """What a child sends back: small, but for the table's arrays (pickled as buffers)."""

    summary: dict[str, Any]
    table: Optional[PlainTable]  # None: could not be read (never cached), or big (in the cache)
    started_at: float  # wall clock when the child began (the server logs its timings)
    parse_s: float  # seconds the parse took
    summary_s: float  # ... and the per-file summary and the plain arrays


def parse_file(key: str, ref: FileRef, cache_root: str, processes: int = 1,
               config: Optional[Settings] = None) -> ParsedFile:
    """Parse one file; return its summary and table (the server writes the cache). A table
    over `HANDOVER_MAX_BYTES` (the file was smaller than `HANDOVER_MAX_JSON_BYTES`, yet its
    table is that big) is written to the cache here with its summary; its view summaries are
    then computed by the server when a view first needs them."""
    started_at, started = time.time(), time.perf_counter()
    table = parse_table(key, ref, processes, config)
    parsed = time.perf_counter()
    summary = summarize(table)
    plain = to_plain(table) if table.status.state != LoadState.ERROR else None
    if plain is not None and sum(a.nbytes for a in plain.arrays.values()) > HANDOVER_MAX_BYTES:
        cache = TraceCache(cache_location(cache_root), config)
        cache.save_table(ref, table)
        store_summary(cache, ref, summary)
        plain = None
    return ParsedFile(summary, plain, started_at, parsed - started, time.perf_counter() - parsed)


def parse_table(key: str, ref: FileRef, processes: int, config: Optional[Settings] = None
                ) -> Any:
    """Parse one file in this process (and `processes - 1` split helpers), reporting progress
    to the server under `key`; `config`: the server's settings (default: this process's)."""
    counted = _ProgressRef(ref.fs, ref.path, ref.size, ref.mtime)
    return parse_trace(counted, progress=_ProgressReporter(key, counted), processes=processes,
                       config=config)


def store_summary(cache: TraceCache, ref: FileRef, summary: FileSummary | dict[str, Any]
                  ) -> None:
    """Keep the summary next to the table (pinned: payload eviction never removes it)."""
    cache.payload(ref, SUMMARY_KEY, lambda: summary, FileSummary, pinned=True)


def peek_summary(cache: TraceCache, ref: FileRef) -> Optional[dict[str, Any]]:
    """The summary a child stored for this exact file version, if any (no parsing)."""
    # validated against FileSummary; a stored summary of the wrong shape is deleted
    summary = cache.get_payload(ref, SUMMARY_KEY, FileSummary, pinned=True)
    return summary if isinstance(summary, dict) else None


class _CountingReader:
    """A file handle that counts the (compressed) bytes read, for progress."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.position = 0

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self.position += len(data)
        return data

    def __enter__(self) -> _CountingReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._handle.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


@dataclass(frozen=True)
class _ProgressRef(FileRef):
    """The same file (same identity, same cache entry), opened through a counting reader."""

    readers: list = field(default_factory=list, compare=False, repr=False)

    def open(self) -> BinaryIO:
        reader = _CountingReader(super().open())
        self.readers.append(reader)
        return reader  # type: ignore[return-value]


class _ProgressReporter:
    def __init__(self, key: str, ref: _ProgressRef) -> None:
        self.key, self.ref, self.last = key, ref, 0.0

    def __call__(self, decompressed_bytes: int) -> None:
        now = time.monotonic()
        if _progress_queue is None or not self.ref.readers or now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        read = self.ref.readers[-1].position
        if not self.ref.path.endswith(".gz"):
            # Plain JSON: the parser's byte count includes a split parse's child process,
            # whereas this reader only sees the parent's half.
            read = max(read, decompressed_bytes)
        fraction = min(0.99, read / max(1, self.ref.size))
        with contextlib.suppress(OSError, ValueError, queue.Full):
            _progress_queue.put_nowait((self.key, fraction))
