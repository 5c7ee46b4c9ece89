"""Per-file work over many files (a run of 1024 ranks) through an executor, with progress.

`summarise_file` is the task: it runs in a local process or on a Ray worker
(`tb_plugin.executors`), reads one file through fsspec, parses it into the (shared) cache and
returns only a few numbers, so the driver never holds a table. `summarise_files` submits one
task per file and reports each finished file to a `RankProgress` bar, which therefore counts
ranks the same way whether the work runs here or on a cluster.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from concurrent.futures import Executor, Future, as_completed
from pathlib import Path
from typing import Any, Callable, Optional, TextIO, Union

from .cache import TraceCache, cache_location
from .executors import InlineExecutor
from .ingest.schema import PARSER_VERSION
from .ingest.sizing import peak_memory
from .load import load_trace
from .settings import Settings
from .storage import FileRef

#: The cache payload key of a file's counts (`summarise_file`), per parser version: a cached
#: `summary` reads them back without loading any table.
SUMMARY_KEY = f"torch-prof-cli/summary#{PARSER_VERSION}"
#: Seconds between two redraws of the progress bar.
REDRAW_S = 0.2
#: From this many files on, per-file work runs in a local process pool (fewer: in-process).
LOCAL_POOL_FILES = 4


def local_workers(refs: Sequence[FileRef], cpus: int, memory: Optional[int],
                  max_inflate_ratio: float) -> int:
    """Local parser processes for `refs`: 0 (in-process) for a few files, else bounded by the
    CPUs and by half the available `memory` over the biggest file's estimated peak (the
    server pool's estimate, `ingest.sizing.peak_memory`)."""
    if len(refs) < LOCAL_POOL_FILES:
        return 0
    peak = max(peak_memory(ref, max_inflate_ratio) for ref in refs)
    by_memory = (memory // 2) // peak if memory else cpus
    return max(1, min(cpus, len(refs), by_memory))


def summarise_file(ref: FileRef, cache_root: Union[str, Path, None],
                   processes: Optional[int] = 1,
                   on_bytes: Optional[Callable[[int], None]] = None,
                   config: Optional[Settings] = None) -> dict[str, Any]:
    """Parse one file into the cache (`cache_root` None: no cache) and return its counts;
    `on_bytes(n)` (in-process runs only) hears the bytes parsed so far; `config`: the
    command's settings (default: this process's)."""
    cache = TraceCache(None if cache_root is None else cache_location(cache_root), config)
    table = load_trace(ref, use_cache=cache_root is not None, cache=cache, processes=processes,
                       progress=on_bytes)
    counts = {
        "state": table.status.state,
        "messages": list(table.status.messages),
        "events": int(table.event_count),
        "duration_events": len(table.events),
        "memory_events": len(table.memory),
        "flow_events": len(table.flows),
    }
    if cache_root is not None and not table.status.cut_off:  # a file still being written: no
        cache.payload(ref, SUMMARY_KEY, lambda: counts, pinned=True)
    return counts


def stored_summaries(refs: Sequence[FileRef], cache: TraceCache
                     ) -> list[Optional[dict[str, Any]]]:
    """The counts `summarise_file` stored for each file (None: not stored, or cache off)."""
    return [cache.stored_payload(ref, SUMMARY_KEY, pinned=True) for ref in refs]


class RankProgress:
    """A one-line bar over files ("ranks") on a stream: done/total, bytes, rate, failures."""

    def __init__(self, total_files: int, total_bytes: int, *, stream: Optional[TextIO] = None,
                 enabled: bool = True, label: str = "parsing") -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.total_files, self.total_bytes, self.label = total_files, max(total_bytes, 1), label
        self.files = self.bytes = self.failed = 0
        self._start = time.monotonic()
        self._drawn = 0.0

    def advance(self, size: int, ok: bool = True) -> None:
        self.files += 1
        self.bytes += size
        self.failed += 0 if ok else 1
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= REDRAW_S or self.files == self.total_files):
            self._drawn = now
            self.stream.write("\r" + self.line(now))
            self.stream.flush()

    def reading(self, done_bytes: int) -> None:
        """Bytes parsed so far of the file in progress (files parsed in this process only)."""
        now = time.monotonic()
        if self.enabled and now - self._drawn >= REDRAW_S:
            self._drawn = now
            self.stream.write(f"\r{self.line(now)}, current file {done_bytes / 1e6:,.0f} MB")
            self.stream.flush()

    def line(self, now: Optional[float] = None) -> str:
        elapsed = max(1e-9, (now or time.monotonic()) - self._start)
        width = 24
        filled = int(width * self.files / max(1, self.total_files))
        failed = f", {self.failed} failed" if self.failed else ""
        return (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                f"{self.files}/{self.total_files} files, {self.bytes / 1e6:,.1f}/"
                f"{self.total_bytes / 1e6:,.1f} MB, {self.files / elapsed:,.1f} files/s{failed}")

    def close(self) -> None:
        if self.enabled and self.files:
            self.stream.write("\n")
            self.stream.flush()


def summarise_files(executor: Executor, refs: Sequence[FileRef],
                    cache_root: Union[str, Path, None],
                    progress: Optional[RankProgress] = None,
                    task: Callable[..., dict[str, Any]] = summarise_file,
                    config: Optional[Settings] = None,
                    ) -> list[dict[str, Any]]:
    """`task(ref, cache_root, processes)` for every file through `executor`, in `refs`' order
    (and `config=`, the settings to parse with, when given).

    A file whose task fails gets state "error" and the reason as its message (one bad file,
    or a lost worker, never hides the others)."""
    processes = None if len(refs) == 1 else 1  # one file alone may split; many share the cores
    extra: dict[str, Any] = {"on_bytes": progress.reading} if progress is not None and (
        isinstance(executor, InlineExecutor)) else {}
    if config is not None:
        extra["config"] = config
    futures: dict[Future, int] = {
        executor.submit(task, ref, _portable(cache_root), processes, **extra): i
        for i, ref in enumerate(refs)}
    results: list[Optional[dict[str, Any]]] = [None] * len(refs)
    for future in as_completed(futures):
        index = futures[future]
        try:
            results[index] = future.result()
        except Exception as exc:  # noqa: BLE001 - reported on the file, the others go on
            results[index] = {"state": "error", "messages": [f"{type(exc).__name__}: {exc}"],
                              "events": 0, "duration_events": 0, "memory_events": 0,
                              "flow_events": 0}
        if progress is not None:
            progress.advance(refs[index].size, ok=results[index]["state"] != "error")
    return [result for result in results if result is not None]


def _portable(cache_root: Union[str, Path, None]) -> Optional[str]:
    """The cache location as a string a task on another machine can open."""
    return None if cache_root is None else str(cache_root)
