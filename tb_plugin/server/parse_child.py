"""What runs inside a parser process of the `LoadPool`: parse one file into the cache.

A child parses one file, writes the table to the `TraceCache` and returns only a small summary
(state, messages, feature counts), which it also stores next to the table so that a restarted
server knows the file without parsing it again (`peek_summary`). Progress goes back to the
server through a queue handed over when the child starts. This module is imported by the
children: keep it free of TensorBoard imports.
"""

from __future__ import annotations

import contextlib
import os
import queue
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Optional

from ..analysis.features import FEATURES_VERSION, FileSummary, summarize
from ..cache import TraceCache
from ..children import die_with_parent
from ..load import load_trace
from ..storage import FileRef

#: Payload key of the per-file summary the children store next to the parsed table.
SUMMARY_KEY = f"torch-prof-server/summary/v{FEATURES_VERSION}"
CHILD_NICENESS = 2  # parsing yields a little to the server's request threads
PROGRESS_EVERY_S = 0.2

_progress_queue: Any = None


def init_child(progress_queue: Any) -> None:
    """The pool's initializer: keep the progress queue, and run a little below the server."""
    global _progress_queue
    die_with_parent()  # no parser left running when TensorBoard is killed
    _progress_queue = progress_queue
    with contextlib.suppress(AttributeError, OSError):
        os.nice(CHILD_NICENESS)


def parse_into_cache(key: str, ref: FileRef, cache_root: str, processes: int = 1
                     ) -> dict[str, Any]:
    """Parse one file into the cache; return its summary (small, cheap to pickle)."""
    cache = TraceCache(Path(cache_root))
    counted = _ProgressRef(ref.fs, ref.path, ref.size, ref.mtime)
    table = load_trace(counted, cache=cache, progress=_ProgressReporter(key, counted),
                       processes=processes)
    summary = summarize(table)
    if summary["state"] != "error":  # error tables are not cached: a retry re-reads the file
        store_summary(cache, ref, summary)
    return summary


def store_summary(cache: TraceCache, ref: FileRef, summary: FileSummary) -> None:
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
