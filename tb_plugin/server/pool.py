"""Parse trace files in child processes, a few at a time, into the on-disk cache.

A child parses one file and writes the table to the `TraceCache`; it sends back only a small
summary (state, messages, feature counts), never the table: the server reads tables from the
cache when a view needs them, which is fast and needs no big pickles. How many files are parsed at
once is bounded by the cores and by a memory budget (each file's peak is estimated from its size),
and one file is always allowed to run, however big. Children are started with `spawn` (TensorBoard
is multi-threaded, so `fork` is unsafe) and the pool is shut down when idle, so an idle server
holds no parser processes.
"""

from __future__ import annotations

import contextlib
import heapq
import inspect
import itertools
import logging
import multiprocessing
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional

from ..analysis.features import FEATURES_VERSION
from ..storage import FileRef

log = logging.getLogger(__name__)

#: Payload key of the per-file summary the children store next to the parsed table.
SUMMARY_KEY = f"torch-prof-server/summary/v{FEATURES_VERSION}"

START_METHOD_ENV = "TORCH_PROF_START_METHOD"
WORKERS_ENV = "TORCH_PROF_LOAD_WORKERS"
MEMORY_ENV = "TORCH_PROF_LOAD_MEMORY_MB"

#: Peak memory of a parser process beyond the file itself (interpreter, numpy, pandas, buffers).
BASE_MEMORY = 192 << 20
#: gzip traces inflate 10-30x; the parser's peak grows with the JSON size, not the gzip size.
GZIP_EXPANSION = 20
IDLE_SHUTDOWN_S = 60.0
PROGRESS_INTERVAL_S = 0.25
CHILD_NICENESS = 2  # parsing yields a little to the server's request threads


# -- sizing --------------------------------------------------------------------------------------


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available_memory() -> Optional[int]:
    """Bytes of memory available to new processes now (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def _env_int(name: str) -> Optional[int]:
    value = os.environ.get(name, "").strip()
    try:
        return int(value) if value else None
    except ValueError:
        log.warning("ignoring %s=%r: not an integer", name, value)
        return None


def default_memory_budget() -> int:
    configured = _env_int(MEMORY_ENV)
    if configured:
        return configured << 20
    available = available_memory()
    return available // 2 if available else 4 << 30


def default_workers(budget: int) -> int:
    configured = _env_int(WORKERS_ENV)
    if configured:
        return max(1, configured)
    return max(1, min(cpu_count(), budget // BASE_MEMORY, 8))


def estimate_memory(ref: FileRef) -> int:
    expanded = ref.size * GZIP_EXPANSION if ref.path.endswith(".gz") else ref.size
    return BASE_MEMORY + expanded


# -- jobs --------------------------------------------------------------------------------------


@dataclass
class LoadJob:
    key: str  # the file's identity: results for a file that changed since are ignored
    ref: FileRef
    estimate: int
    priority: int = 0
    attempts: int = 0
    solo: bool = False  # after a crash: run alone, so a second crash names the culprit
    processes: int = 1  # 2 when the parser may split the file across two processes
    token: int = field(default=0, compare=False)


@dataclass
class LoadOutcome:
    key: str
    summary: Optional[dict[str, Any]] = None
    error: Optional[str] = None


class LoadPool:
    """A priority queue of files in front of a `ProcessPoolExecutor`, run by one thread.

    Callbacks (`on_start(key)`, `on_progress(key, fraction)`, `on_done(outcome)`) are called
    from the pool's thread and must be quick.
    """

    def __init__(
        self,
        cache_root: Path,
        on_start: Callable[[str], None],
        on_progress: Callable[[str, float], None],
        on_done: Callable[[LoadOutcome], None],
        *,
        workers: Optional[int] = None,
        memory_budget: Optional[int] = None,
        idle_shutdown_s: float = IDLE_SHUTDOWN_S,
        start_method: Optional[str] = None,
    ) -> None:
        self.cache_root = cache_root
        self.memory_budget = memory_budget or default_memory_budget()
        self.workers = workers or default_workers(self.memory_budget)
        self.idle_shutdown_s = idle_shutdown_s
        self.start_method = start_method or os.environ.get(START_METHOD_ENV) or "spawn"
        self._on_start, self._on_progress, self._on_done = on_start, on_progress, on_done
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: dict[str, LoadJob] = {}
        self._heap: list[tuple[int, int, int, str]] = []  # (-priority, size, token, key)
        self._tokens = itertools.count(1)
        self._running: dict[int, LoadJob] = {}
        self._memory_in_use = 0
        self._done: deque[tuple[LoadJob, Future]] = deque()
        self._executor: Optional[ProcessPoolExecutor] = None
        self._progress_queue: Any = None
        self._broken = False
        self._idle_since = time.monotonic()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="torch-prof-loader", daemon=True)
        self._thread.start()
        log.info("torch-prof: parsing up to %d files at once (memory budget %d MB, %s)",
                 self.workers, self.memory_budget >> 20, self.start_method)

    # -- public API (any thread) ---------------------------------------------------------------

    def submit(self, job: LoadJob) -> None:
        with self._lock:
            job.token = next(self._tokens)
            self._pending[job.key] = job
            heapq.heappush(self._heap, _entry(job))
        self._wake.set()

    def bump(self, key: str, priority: int = 10) -> None:
        """Move a queued file ahead: someone is waiting for it."""
        with self._lock:
            job = self._pending.get(key)
            if job is None or job.priority >= priority:
                return
            job.priority, job.token = priority, next(self._tokens)
            heapq.heappush(self._heap, _entry(job))
        self._wake.set()

    def cancel(self, key: str) -> None:
        """Forget a queued file (it changed or vanished); a running parse just finishes."""
        with self._lock:
            self._pending.pop(key, None)

    def busy(self) -> bool:
        with self._lock:
            return bool(self._pending or self._running)

    def running_count(self) -> int:
        with self._lock:
            return len(self._running)

    def close(self) -> None:
        """Stop now: drop the queue and kill running parsers (used at server exit)."""
        with self._lock:
            self._closed = True
            self._pending.clear()
            executor, self._executor = self._executor, None
        self._wake.set()
        if executor is not None:
            _kill(executor)
        if self._progress_queue is not None:
            self._progress_queue.cancel_join_thread()
            self._progress_queue.close()

    # -- the pool thread -------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed:
            try:
                self._drain_progress()
                self._collect()
                self._dispatch()
                self._shutdown_if_idle()
            except Exception:  # the loader thread must survive any bug
                log.exception("torch-prof loader loop failed")
            self._wake.wait(PROGRESS_INTERVAL_S if self._running else 2.0)
            self._wake.clear()

    def _next_job(self) -> Optional[LoadJob]:
        """The highest-priority valid queued job (stale heap entries are dropped)."""
        while self._heap:
            *_, token, key = self._heap[0]
            job = self._pending.get(key)
            if job is not None and job.token == token:
                return job
            heapq.heappop(self._heap)
        return None

    def _fits(self, job: LoadJob) -> bool:
        if not self._running:
            return True  # always one file, however big
        if job.solo or any(j.solo for j in self._running.values()):
            return False
        slots = sum(j.processes for j in self._running.values())
        return (slots < self.workers
                and self._memory_in_use + job.estimate <= self.memory_budget)

    def _processes_for(self, job: LoadJob) -> int:
        """A file parsed alone may use two processes (the parser splits big local files), so
        one huge trace still uses both cores; otherwise one process per file."""
        alone = not self._running and len(self._pending) == 1
        return 2 if alone and self.workers >= 2 and _split_allowed() else 1

    def _dispatch(self) -> None:
        started = []
        with self._lock:
            while not self._closed and not self._broken:
                job = self._next_job()
                if job is None or not self._fits(job):
                    break
                processes = self._processes_for(job)
                try:
                    future = self._executor_or_new().submit(
                        parse_into_cache, job.key, job.ref, str(self.cache_root), processes)
                except (BrokenProcessPool, RuntimeError) as exc:  # broken, or interpreter exit
                    log.warning("torch-prof: cannot start a parser process: %s", exc)
                    self._broken = True
                    break
                heapq.heappop(self._heap)
                del self._pending[job.key]
                if processes > 1:
                    job.processes, job.estimate = processes, job.estimate + BASE_MEMORY
                self._running[job.token] = job
                self._memory_in_use += job.estimate
                future.add_done_callback(lambda f, j=job: self._finished(j, f))
                started.append(job.key)
        for key in started:
            self._on_start(key)

    def _finished(self, job: LoadJob, future: Future) -> None:
        self._done.append((job, future))
        self._wake.set()

    def _collect(self) -> None:
        while self._done:
            job, future = self._done.popleft()
            with self._lock:
                self._running.pop(job.token, None)
                self._memory_in_use -= job.estimate
                if not self._running:
                    self._idle_since = time.monotonic()
            outcome = self._outcome(job, future)
            if outcome is not None:
                self._on_done(outcome)
        if self._broken and not self._running:
            self._replace_broken_executor()

    def _outcome(self, job: LoadJob, future: Future) -> Optional[LoadOutcome]:
        try:
            return LoadOutcome(job.key, summary=future.result())
        except CancelledError:
            return None
        except BrokenProcessPool:
            self._broken = True
            if job.attempts == 0:  # maybe another file's crash: retry it alone
                job.attempts, job.solo = 1, True
                job.processes, job.estimate = 1, estimate_memory(job.ref)
                self.submit(job)
                return None
            return LoadOutcome(job.key, error="the parser process died while reading this file "
                               "(out of memory, or killed); try a machine with more memory")
        except Exception as exc:
            log.exception("loading %s failed", job.ref.url)
            return LoadOutcome(job.key, error=f"internal error while loading "
                               f"({type(exc).__name__}: {exc}); please report it")

    def _replace_broken_executor(self) -> None:
        with self._lock:
            executor, self._executor, self._broken = self._executor, None, False
        if executor is not None:
            _kill(executor)

    def _executor_or_new(self) -> ProcessPoolExecutor:
        if self._executor is None:
            context = multiprocessing.get_context(self.start_method)
            if self._progress_queue is None:
                self._progress_queue = context.Queue()
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=context, initializer=_init_child,
                initargs=(self._progress_queue,))
        return self._executor

    def _drain_progress(self) -> None:
        if self._progress_queue is None:
            return
        for _ in range(10_000):
            try:
                key, fraction = self._progress_queue.get_nowait()
            except queue.Empty:
                return
            except (OSError, EOFError, ValueError):  # closed at shutdown
                return
            self._on_progress(key, fraction)

    def _shutdown_if_idle(self) -> None:
        with self._lock:
            idle = (self._executor is not None and not self._running and not self._pending
                    and time.monotonic() - self._idle_since > self.idle_shutdown_s)
            executor = self._executor if idle else None
            if idle:
                self._executor = None
        if executor is not None:
            executor.shutdown(wait=True)  # idle: the children exit at once


def _entry(job: LoadJob) -> tuple[int, int, int, str]:
    """Heap order: requested files first, then smaller files (the first views are ready
    sooner, and a big file does not hold up a run of small ones), then arrival."""
    return (-job.priority, job.ref.size, job.token, job.key)


def _split_allowed() -> bool:
    """Whether the user left the parser's own two-process split on."""
    try:
        from ..ingest.parallel import wanted_processes
    except ImportError:
        return False
    return wanted_processes(None) >= 2


def _kill(executor: ProcessPoolExecutor) -> None:
    """Shut an executor down without waiting for running parses (they may take minutes)."""
    processes = list((getattr(executor, "_processes", None) or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            process.terminate()
    deadline = time.monotonic() + 5  # reap them, so old and new parsers never add up
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AttributeError, AssertionError):
            process.join(max(0.0, deadline - time.monotonic()))


# -- the child side ------------------------------------------------------------------------------

_progress_queue: Any = None


def _init_child(progress_queue: Any) -> None:
    global _progress_queue
    _progress_queue = progress_queue
    with contextlib.suppress(AttributeError, OSError):
        os.nice(CHILD_NICENESS)


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
        if _progress_queue is None or not self.ref.readers or now - self.last < 0.2:
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


def parse_into_cache(key: str, ref: FileRef, cache_root: str, processes: int = 1
                     ) -> dict[str, Any]:
    """Child: parse one file into the cache; return its summary (small, cheap to pickle)."""
    from ..analysis.features import summarize
    from ..cache import TraceCache
    from ..ingest import load_trace

    cache = TraceCache(Path(cache_root))
    counted = _ProgressRef(ref.fs, ref.path, ref.size, ref.mtime)
    extra = {"processes": processes} if _accepts(load_trace, "processes") else {}
    table = load_trace(counted, cache=cache, progress=_ProgressReporter(key, counted), **extra)
    summary = summarize(table)
    if summary["state"] != "error":  # error tables are not cached: a retry re-reads the file
        cache.payload(ref, SUMMARY_KEY, lambda: summary)
    return summary


def _accepts(function: Callable[..., Any], name: str) -> bool:
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


class _Missing(Exception):
    pass


def _missing() -> Any:
    raise _Missing


def peek_summary(cache: Any, ref: FileRef) -> Optional[dict[str, Any]]:
    """The summary a child stored for this exact file version, if any (no parsing)."""
    try:
        summary = cache.payload(ref, SUMMARY_KEY, _missing)
    except _Missing:
        return None
    return summary if isinstance(summary, dict) and "state" in summary else None
